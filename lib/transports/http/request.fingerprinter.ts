import { type ExecutionContext, Injectable, Logger } from '@nestjs/common';
import { IdempotencyException } from '../../shared/exceptions/idempotency.exception.js';
import type { HttpRequestLike } from '../../shared/http/http-request.js';
import { requestTarget } from './request.reader.js';
import { MESSAGES } from '../../shared/messages/client.messages.js';
import { LOGS } from '../../shared/messages/operator.messages.js';
import type { ResolvedRouteOptions } from '../../shared/interfaces/resolved-options.interface.js';
import { CANONICAL_TAG, RAW_TAG, tagged, tagOf } from '../../shared/utils/fingerprint-tag.util.js';
import { BodyTooDeepError, requestFingerprint } from '../../shared/utils/fingerprint.util.js';

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null | undefined)?.then === 'function';
}

/** A body nested too deep to fingerprint is the client's 400; any other failure is the application's. */
function tooDeep(err: unknown): never {
  if (err instanceof BodyTooDeepError) throw IdempotencyException.of('body-too-deep', MESSAGES.tooDeep);
  throw err;
}

/**
 * What tells one request from another under the same key: the fingerprint a claim stores, and
 * whether a stored one is this request's.
 */
@Injectable()
export class RequestFingerprinter {
  private readonly logger = new Logger('Idempotency');
  private warnedNoRawBody = false;

  /**
   * The request's fingerprint under the tag of what it was made from: the parsed body (canonical),
   * its bytes (`'raw'`; the parsed body when there are none), or what the route's function returns.
   * Synchronous but for a function's, so the default path awaits nothing.
   */
  of(request: HttpRequestLike, context: ExecutionContext, route: ResolvedRouteOptions): string | Promise<string> {
    try {
      const made = this.made(request, context, route);
      return typeof made === 'string' ? made : made.catch(tooDeep);
    } catch (err) {
      return tooDeep(err);
    }
  }

  /**
   * Whether a stored fingerprint is this request's: the same, or made under another fingerprint
   * setting (a deploy changed it) and equal to this request's recomputed with that setting when it is
   * a built-in one. A function's (or a newer version's) cannot be recomputed: the request is taken as
   * the same, with a warning; that replays or answers 409, and never runs the handler a second time
   * for the key.
   */
  matches(stored: string, fingerprint: string, request: HttpRequestLike, route: ResolvedRouteOptions): boolean {
    if (stored === fingerprint) return true;
    const tag = tagOf(stored);
    if (tag === tagOf(fingerprint)) return false;
    if (tag === CANONICAL_TAG) return this.recomputed(stored, request, request.body, route);
    if (tag === RAW_TAG && request.rawBody !== undefined) {
      return this.recomputed(stored, request, request.rawBody, route, RAW_TAG);
    }
    this.logger.warn(LOGS.fingerprintUnverifiable(route.id, JSON.stringify(tag.slice(0, 40))));
    return true;
  }

  private made(request: HttpRequestLike, context: ExecutionContext, route: ResolvedRouteOptions): string | Promise<string> {
    const { fingerprint: mode } = route;
    if (typeof mode === 'function') {
      const picked = mode(request, context);
      const tag = route.fingerprintTag;
      return isThenable(picked)
        ? Promise.resolve(picked).then((value) => tagged(tag, this.hash(request, value, route)))
        : tagged(tag, this.hash(request, picked, route));
    }
    if (mode === 'raw' && request.rawBody !== undefined) return tagged(RAW_TAG, this.hash(request, request.rawBody, route));
    return this.hash(request, mode === 'raw' ? this.parsedForRaw(request, route) : request.body, route);
  }

  private hash(request: HttpRequestLike, body: unknown, route: ResolvedRouteOptions): string {
    return requestFingerprint(request.method, requestTarget(request), body, route.id);
  }

  private recomputed(
    stored: string,
    request: HttpRequestLike,
    body: unknown,
    route: ResolvedRouteOptions,
    tag = CANONICAL_TAG,
  ): boolean {
    try {
      return stored === tagged(tag, this.hash(request, body, route));
    } catch (err) {
      // Too deep to fingerprint now, so it was not fingerprinted this way before.
      if (err instanceof BodyTooDeepError) return false;
      throw err;
    }
  }

  /**
   * What stands in on a `'raw'` route for bytes it does not have (the application was not created
   * with `rawBody: true`, or no parser ran for a bodiless request): the parsed body. A body parsed
   * but not kept is worth one warning, which says how to fix it.
   */
  private parsedForRaw(request: HttpRequestLike, route: ResolvedRouteOptions): unknown {
    if (request.body !== undefined && request.body !== null && !this.warnedNoRawBody) {
      this.warnedNoRawBody = true;
      this.logger.warn(LOGS.noRawBody(route.id));
    }
    return request.body;
  }
}
