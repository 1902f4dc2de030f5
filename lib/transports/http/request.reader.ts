import { routedPath } from './route-path.js';

/** The subset of Express and Fastify requests the protocol reads. */
export interface HttpRequestLike {
  method: string;
  url: string;
  originalUrl?: string;
  headers: Record<string, string | string[] | undefined>;
  body?: unknown;
  /** The body's bytes, kept by Nest's `rawBody: true` application option (Express and Fastify). */
  rawBody?: Buffer;
  /** Fastify's request wraps Node's; Express's is Node's. */
  raw?: { readableEnded?: boolean };
  readableEnded?: boolean;
  /** The host the request was routed by, without its port (Express and Fastify both set it). */
  hostname?: string;
  /** Express: the route the request reached (its path as declared), under the router's `baseUrl`. */
  route?: { path?: unknown };
  baseUrl?: string;
  /** Fastify: the route the request reached, its `url` as declared. */
  routeOptions?: { url?: string };
}

/** A header as one string: a repeated one joined as Node joins them, `undefined` when it was not sent. */
export function sentHeader(request: HttpRequestLike, name: string): string | undefined {
  const header = request.headers[name];
  return typeof header === 'string' ? header : header?.join(', ');
}

/**
 * The host a host-routed controller matched the request by, lower case and without a port: what
 * keeps one tenant's keys apart from another's on `@Controller({ host: ':tenant.example.com' })`.
 */
export function requestHost(request: HttpRequestLike): string {
  const host = request.hostname ?? (request.headers.host as string | undefined) ?? '';
  return host.replace(/:\d+$/, '').toLowerCase();
}

/** The path of the route the request reached, as declared: Express's or Fastify's. */
function routePattern(request: HttpRequestLike): string | undefined {
  const declared = request.route?.path;
  if (typeof declared === 'string') return (request.baseUrl ?? '') + declared;
  return request.routeOptions?.url;
}

/**
 * The request target (path and query) as received, its path spelled as the route it reached
 * ({@link routedPath}): Express rewrites `url` under a mounted router, so `originalUrl` first.
 */
export function requestTarget(request: HttpRequestLike): string {
  const target = request.originalUrl ?? request.url;
  const pattern = routePattern(request);
  if (pattern === undefined) return target;
  const q = target.indexOf('?');
  const path = q === -1 ? target : target.slice(0, q);
  if (path === pattern) return target;
  const routed = routedPath(path, pattern);
  return q === -1 ? routed : routed + target.slice(q);
}

/**
 * A body was sent that nothing has read: no body parser took its media type, so `request.body`
 * does not show it and the fingerprint cannot tell two such bodies apart.
 */
export function hasUnreadBody(request: HttpRequestLike): boolean {
  const { headers } = request;
  const sent =
    headers['transfer-encoding'] !== undefined || (headers['content-length'] !== undefined && headers['content-length'] !== '0');
  return sent && (request.raw ?? request).readableEnded === false;
}
