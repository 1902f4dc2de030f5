import { type ExecutionContext, Inject, Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { IDEMPOTENCY_MODULE_OPTIONS, RETRY_AFTER } from './idempotency.constants.js';
import { LOGS, MESSAGES } from './idempotency.messages.js';
import { IdempotencyException } from './exceptions/idempotency.exception.js';
import { IdempotentReplay } from './exceptions/idempotent-replay.exception.js';
import { hasUnreadBody, type HttpRequestLike, requestHost, requestTarget } from './http/request.reader.js';
import { ResponseSealer, UnsealableRecord } from './encryption/response.sealer.js';
import { IdempotencyObserver } from './events/idempotency.observer.js';
import { IdentityResolverLoader } from './identity-resolver.loader.js';
import { errorResponse } from './idempotency.answers.js';
import type { IdempotencyErrorCode } from './interfaces/idempotency-error.interface.js';
import type { IdempotencyOutcome } from './interfaces/idempotency-event.interface.js';
import type { ActiveClaim } from './interfaces/active-claim.interface.js';
import type { IdempotencyRecord } from './interfaces/idempotency-store.interface.js';
import type { ResolvedIdempotencyOptions, ResolvedRouteOptions } from './interfaces/resolved-options.interface.js';
import type { StoredResponse } from './interfaces/stored-response.interface.js';
import { CANONICAL_TAG, RAW_TAG, tagged, tagOf } from './utils/fingerprint-tag.util.js';
import { BodyTooDeepError, requestFingerprint } from './utils/fingerprint.util.js';
import { cacheKey, decodeKey, escapeScope, keyViolation, UNSCOPED } from './utils/key.util.js';

const NO_HEADERS: Readonly<Record<string, string>> = {};

/** What {@link IdempotencyService.begin} learns on the way that an outcome needs. */
interface Seen {
  key: string | undefined;
  storeMs: number;
}
/** Written to, never read: nothing observes outcomes. */
const UNOBSERVED: Seen = { key: undefined, storeMs: 0 };

/** The outcome of the module's own answers but rejections (400, 415, 500). */
const OUTCOMES: Partial<Record<IdempotencyErrorCode, IdempotencyOutcome>> = {
  'key-in-flight': 'conflict',
  'key-reused': 'mismatch',
  'store-unavailable': 'store-unavailable',
  'record-unreadable': 'store-unavailable',
  'shutting-down': 'store-unavailable',
};

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null | undefined)?.then === 'function';
}

/** First pause before a failed commit is tried again; it doubles up to {@link MAX_COMMIT_RETRY_MS}. */
const COMMIT_RETRY_MS = 100;
const MAX_COMMIT_RETRY_MS = 2_000;

/** First pause before a claim that failed is released again; it doubles after each failure. */
const ABANDON_RETRY_MS = 100;

/**
 * The idempotency protocol: validate the key, resolve the scope, fingerprint the request, then one
 * store round trip to claim or replay, and one to commit or release. It knows requests and stores,
 * not responses: recording and replaying them is the interceptor's.
 */
@Injectable()
export class IdempotencyService {
  private readonly logger = new Logger('Idempotency');
  private warnedNoRawBody = false;

  constructor(
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) readonly options: ResolvedIdempotencyOptions,
    private readonly identities: IdentityResolverLoader,
    readonly observer: IdempotencyObserver,
    private readonly sealer: ResponseSealer,
  ) {}

  /**
   * Claims the request's key. Returns the claim, or `undefined` when the request has no key and the
   * route passes such requests through. Throws an {@link IdempotencyException} (400, 409, 415, 422,
   * 500, 503) or an {@link IdempotentReplay} carrying the stored response.
   */
  begin(request: HttpRequestLike, context: ExecutionContext, route: ResolvedRouteOptions): Promise<ActiveClaim | undefined> {
    if (!this.observer.enabled) return this.decide(request, context, route, UNOBSERVED);
    const seen: Seen = { key: undefined, storeMs: 0 };
    return this.decide(request, context, route, seen).then(
      (claim) => {
        if (!claim) this.observer.emit('bypassed', { route: route.id, method: request.method });
        return claim;
      },
      (err: unknown) => {
        this.observed(err, request, route, seen);
        throw err;
      },
    );
  }

  /** Reports what {@link begin} answered with (its errors and replays); an application's own error is not an outcome. */
  private observed(err: unknown, request: HttpRequestLike, route: ResolvedRouteOptions, seen: Seen): void {
    const facts = { route: route.id, method: request.method, storeMs: seen.storeMs, key: seen.key };
    if (err instanceof IdempotentReplay) {
      this.observer.emit('replayed', { ...facts, status: err.response.status });
    } else if (err instanceof IdempotencyException) {
      this.observer.emit(OUTCOMES[err.code!] ?? 'rejected', { ...facts, status: err.getStatus(), code: err.code });
    }
  }

  private async decide(
    request: HttpRequestLike,
    context: ExecutionContext,
    route: ResolvedRouteOptions,
    seen: Seen,
  ): Promise<ActiveClaim | undefined> {
    const { headerName, maxKeyLength, keyPrefix, store } = this.options;
    const header = request.headers[headerName];
    const sent = typeof header === 'string' ? header : header?.join(', ');
    // Length first, so a megabyte header is refused unread. Quoted, a key of the longest length may
    // be two quotes and a backslash per character longer.
    if (sent !== undefined && sent.length > (sent.startsWith('"') ? 2 * maxKeyLength + 2 : maxKeyLength)) {
      throw new IdempotencyException(400, MESSAGES.tooLong(headerName, maxKeyLength), NO_HEADERS, 'key-invalid');
    }
    const key = sent === undefined ? undefined : decodeKey(sent);
    if (sent !== undefined && key === undefined)
      throw new IdempotencyException(400, MESSAGES.malformed(headerName), NO_HEADERS, 'key-invalid');
    if (key === undefined || key.trim() === '') {
      if (route.missingHeader === 'pass-through') return undefined;
      throw new IdempotencyException(400, MESSAGES.missing(headerName), NO_HEADERS, 'key-missing');
    }
    const keyProblem = keyViolation(headerName, key, key.length, maxKeyLength);
    if (keyProblem) throw new IdempotencyException(400, keyProblem, NO_HEADERS, 'key-invalid');
    if (hasUnreadBody(request)) throw new IdempotencyException(415, MESSAGES.unreadBody, NO_HEADERS, 'body-unread');

    seen.key = key;
    let scope = route.identity ? await this.scope(request, context, route) : UNSCOPED;
    // Escaped, the host holds no ':' and the scope after it none either: hosts never share a key.
    if (route.hostScoped) scope = `${escapeScope(requestHost(request))}@${scope}`;
    let fingerprint: string;
    try {
      const made = this.fingerprint(request, context, route);
      fingerprint = typeof made === 'string' ? made : await made;
    } catch (err) {
      if (err instanceof BodyTooDeepError) throw new IdempotencyException(400, MESSAGES.tooDeep, NO_HEADERS, 'body-too-deep');
      throw err;
    }

    const claim: ActiveClaim = {
      key,
      cacheKey: cacheKey(keyPrefix, scope, key),
      owner: randomUUID(),
      fingerprint,
      ttlMs: route.ttlMs,
      route: route.id,
      leaseMs: route.leaseMs,
      claimedAt: Date.now(),
      heldUntil: 0,
      method: request.method,
      storeMs: 0,
    };
    claim.heldUntil = claim.claimedAt + route.leaseMs;
    let outcome;
    const startedAt = this.observer.now();
    try {
      outcome = await store.claim(claim.cacheKey, { owner: claim.owner, fingerprint, leaseMs: route.leaseMs });
    } catch (err) {
      seen.storeMs = this.observer.stored('claim', startedAt, err);
      // Fail closed: without the store there is no telling whether this key already ran.
      this.logger.error(LOGS.claimFailed(route.id, (err as Error).message));
      this.abandon(claim);
      throw new IdempotencyException(503, MESSAGES.unavailable, RETRY_AFTER, 'store-unavailable');
    }
    claim.storeMs = seen.storeMs = this.observer.stored('claim', startedAt);
    switch (outcome.state) {
      case 'claimed':
        // On the span now, while it is open for sure: a first run's end (released, not-stored) replaces it if it still is.
        this.observer.mark('executed');
        return claim;
      case 'in-flight':
        if (outcome.fingerprint !== fingerprint && !this.sameRequest(outcome.fingerprint, fingerprint, request, route))
          throw new IdempotencyException(422, MESSAGES.reused(headerName), NO_HEADERS, 'key-reused');
        throw new IdempotencyException(409, MESSAGES.inFlight(headerName), RETRY_AFTER, 'key-in-flight');
      case 'completed':
        if (
          outcome.record.fingerprint !== fingerprint &&
          !this.sameRequest(outcome.record.fingerprint, fingerprint, request, route)
        ) {
          // A sealed record's fingerprint is authenticated with it: one altered in the store is
          // unreadable (503), not a reused key (422).
          if (outcome.record.sealed) this.replayable(claim.cacheKey, outcome.record, route);
          throw new IdempotencyException(422, MESSAGES.reused(headerName), NO_HEADERS, 'key-reused');
        }
        throw new IdempotentReplay(this.replayable(claim.cacheKey, outcome.record, route));
      case 'unreadable':
        throw this.unreadable(route, outcome.reason);
    }
  }

  /** The answer to a request with a key while the application shuts down: its client retries elsewhere. */
  shuttingDown(): IdempotencyException {
    return new IdempotencyException(503, MESSAGES.shuttingDown, RETRY_AFTER, 'shutting-down');
  }

  /** The response of a record to replay: opened when sealed; one that cannot be opened is unreadable. */
  private replayable(storeKey: string, record: IdempotencyRecord, route: ResolvedRouteOptions): StoredResponse {
    try {
      return this.sealer.response(storeKey, record);
    } catch (err) {
      if (err instanceof UnsealableRecord) throw this.unreadable(route, err.message);
      throw err;
    }
  }

  /** A record that may stand for a charge but cannot be read: neither replayed nor run again; the deploy or an operator ends it. */
  private unreadable(route: ResolvedRouteOptions, reason: string): IdempotencyException {
    this.logger.error(LOGS.unreadable(route.id, reason));
    return new IdempotencyException(503, MESSAGES.unreadable, RETRY_AFTER, 'record-unreadable');
  }

  /**
   * Stores the response in place of the claim. Never throws: the client gets its response regardless.
   * Resolves after the first attempt, so the response waits for one store round trip only. A commit
   * that failed (the store restarted, a lock was held) is tried again in the background, with a
   * doubling pause, for as long as the lease is held (the renewer keeps renewing it meanwhile): an
   * outage shorter than the lease never lets a retry run the handler again. `settled` is called once
   * the key's fate is decided, stored or given up.
   */
  async commit(claim: ActiveClaim, response: StoredResponse, settled?: () => void): Promise<void> {
    claim.settling = true;
    const record = this.recordOf(claim, response);
    const first = await this.tryCommit(claim, record);
    if (first === undefined) {
      void this.retryCommit(claim, record, response.status).finally(settled);
      return;
    }
    this.committed(claim, first, response.status);
    settled?.();
  }

  /** One fenced commit: `true` stored, `false` the claim was not ours any more, `undefined` the store failed. */
  private async tryCommit(claim: ActiveClaim, record: IdempotencyRecord): Promise<boolean | undefined> {
    const startedAt = this.observer.now();
    try {
      const stored = await this.options.store.commit(claim.cacheKey, claim.owner, record, claim.ttlMs);
      claim.storeMs += this.observer.stored('commit', startedAt);
      return stored;
    } catch (err) {
      claim.storeMs += this.observer.stored('commit', startedAt, err);
      this.logger.warn(LOGS.commitRetrying(claim.route, (err as Error).message));
      return undefined;
    }
  }

  private async retryCommit(claim: ActiveClaim, record: IdempotencyRecord, status: number): Promise<void> {
    // For one lease at most: a commit the store keeps refusing while it renews (a value it cannot
    // take) must not hold the key until maxHoldMs.
    const deadline = Date.now() + claim.leaseMs;
    for (let pause = COMMIT_RETRY_MS; ; pause = Math.min(pause * 2, MAX_COMMIT_RETRY_MS)) {
      // Past the lease as far as this process knows (or a renewal found it gone), a fenced commit can only fail: give up.
      let giveUp = Date.now() + pause >= Math.min(claim.heldUntil, deadline);
      if (!giveUp) {
        await new Promise((r) => setTimeout(r, pause));
        giveUp = claim.lost === true;
      }
      if (giveUp) {
        this.logger.error(LOGS.commitFailed(claim.route));
        this.outcome(claim, 'not-stored', status);
        return;
      }
      const stored = await this.tryCommit(claim, record);
      if (stored !== undefined) {
        if (stored) this.logger.log(LOGS.committedLate(claim.route));
        this.committed(claim, stored, status);
        return;
      }
    }
  }

  private committed(claim: ActiveClaim, stored: boolean, status: number): void {
    if (!stored) this.logger.warn(LOGS.takenOver(claim.route));
    this.outcome(claim, stored ? 'executed' : 'not-stored', status);
  }

  /**
   * What is stored for the claim's response: sealed when `encryption` is on. A body over
   * `maxResponseBytes` is not kept: the record holds the response's status and a short JSON body
   * saying so (`response-too-large`), which retries get for the ttl; the handler never runs again.
   */
  recordOf(claim: ActiveClaim, response: StoredResponse): IdempotencyRecord {
    const kept = response.body.length > this.options.maxResponseBytes ? this.tooLarge(claim, response) : response;
    return this.sealer.record(claim.cacheKey, claim.fingerprint, kept);
  }

  private tooLarge(claim: ActiveClaim, response: StoredResponse): StoredResponse {
    const { maxResponseBytes } = this.options;
    this.logger.warn(LOGS.tooLargeToStore(claim.route, response.body.length, maxResponseBytes));
    const note = new IdempotencyException(
      response.status,
      MESSAGES.tooLargeToReplay(maxResponseBytes),
      NO_HEADERS,
      'response-too-large',
    );
    return errorResponse(note, this.options);
  }

  /**
   * Frees the key for a retry. Never throws: a claim that cannot be deleted expires with its lease.
   * `outcome` is what the request comes to: by default a handler's error.
   */
  async release(claim: ActiveClaim, outcome: IdempotencyOutcome = 'released', answer?: IdempotencyException): Promise<void> {
    claim.settling = true;
    const startedAt = this.observer.now();
    let failed: unknown;
    try {
      await this.options.store.release(claim.cacheKey, claim.owner);
    } catch (err) {
      failed = err;
      this.logger.error(LOGS.releaseFailed(claim.route, (err as Error).message));
    }
    claim.storeMs += this.observer.stored('release', startedAt, failed);
    this.outcome(claim, outcome, answer);
  }

  /** Reports what a claimed request came to, with the status and code of the module's answer when it gave one. */
  outcome(claim: ActiveClaim, outcome: IdempotencyOutcome, answer?: number | IdempotencyException): void {
    if (!this.observer.enabled) return;
    const status = typeof answer === 'number' ? answer : answer?.getStatus();
    const { route, method, storeMs, key } = claim;
    this.observer.emit(outcome, {
      route,
      method,
      storeMs,
      key,
      status,
      code: typeof answer === 'object' ? answer.code : undefined,
    });
  }

  /**
   * The request's fingerprint under the tag of what it was made from: the parsed body (canonical),
   * its bytes (`'raw'`; the parsed body when there are none), or what the route's function returns.
   * Synchronous but for a function's, so the default path awaits nothing.
   */
  private fingerprint(
    request: HttpRequestLike,
    context: ExecutionContext,
    route: ResolvedRouteOptions,
  ): string | Promise<string> {
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

  /**
   * Whether a stored fingerprint that differs from this request's is still this request's: made
   * under another fingerprint setting (a deploy changed it), it is compared by recomputing this
   * request's with that setting when it is a built-in one. A function's (or a newer version's) cannot
   * be recomputed: the request is taken as the same, with a warning; that replays or answers 409,
   * and never runs the handler a second time for the key.
   */
  private sameRequest(stored: string, fingerprint: string, request: HttpRequestLike, route: ResolvedRouteOptions): boolean {
    const tag = tagOf(stored);
    if (tag === tagOf(fingerprint)) return false;
    if (tag === CANONICAL_TAG) return this.recomputed(stored, request, request.body, route);
    if (tag === RAW_TAG && request.rawBody !== undefined) {
      return this.recomputed(stored, request, request.rawBody, route, RAW_TAG);
    }
    this.logger.warn(LOGS.fingerprintUnverifiable(route.id, JSON.stringify(tag.slice(0, 40))));
    return true;
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

  /** The caller's scope, escaped for the cache key. */
  private async scope(request: HttpRequestLike, context: ExecutionContext, route: ResolvedRouteOptions): Promise<string> {
    const raw = await (await this.identities.load(route.identity!))(request, context);
    if (typeof raw !== 'string' || raw === '') {
      // The server's fault, not the client's: an empty scope would merge every caller into one.
      this.logger.error(LOGS.noScope(route.id, raw));
      throw new IdempotencyException(500, MESSAGES.noScope, NO_HEADERS, 'scope-unresolved');
    }
    const scope = escapeScope(raw);
    const problem = keyViolation(MESSAGES.scope, raw, scope.length, this.options.maxScopeLength);
    if (problem) throw new IdempotencyException(400, problem, NO_HEADERS, 'scope-invalid');
    return scope;
  }

  /**
   * A claim whose outcome is unknown (the command timed out) may still land in the store later and
   * block the key for a whole lease. Release it, fenced by its owner, as soon as the store answers:
   * retried with a doubling pause until it is answered or the lease would have run out anyway.
   */
  private abandon(claim: ActiveClaim): void {
    const { store } = this.options;
    const attempt = (pause: number): void => {
      store.release(claim.cacheKey, claim.owner).catch(() => {
        if (Date.now() + pause - claim.claimedAt > claim.leaseMs) return;
        setTimeout(attempt, pause, pause * 2).unref();
      });
    };
    attempt(ABANDON_RETRY_MS);
  }
}
