// The HTTP request as Express and Fastify hand it over: read by the HTTP transport, by GraphQL (which
// runs over HTTP) and by the identity resolvers (a tenant's host).

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
