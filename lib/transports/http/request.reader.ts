import type { HttpRequestLike } from '../../shared/http/http-request.js';
import { routedPath } from './route-path.js';

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
