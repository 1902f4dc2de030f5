import {
  type ExecutionContext,
  Inject,
  Injectable,
  Logger,
  type OnApplicationShutdown,
  type OnModuleDestroy,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import type { StoredResponse } from './cache/idempotency-store.interface.js';
import { IDEMPOTENCY_MODULE_OPTIONS, IDEMPOTENT_ROUTE_METADATA } from './idempotency.constants.js';
import { IdempotencyException } from './idempotency.exception.js';
import { MESSAGES } from './idempotency.messages.js';
import { IdempotentReplay } from './idempotent-replay.exception.js';
import type { IdempotentOptions } from './interfaces/idempotent-options.interface.js';
import type {
  IdempotencyIdentity,
  IdempotencyIdentityResolver,
  IdentityFunction,
} from './interfaces/identity-resolver.interface.js';
import { BodyTooDeepError, requestFingerprint } from './utils/fingerprint.util.js';
import { cacheKey, escapeScope, keyViolation, UNSCOPED } from './utils/key.util.js';
import {
  type ResolvedIdempotencyOptions,
  type ResolvedRouteOptions,
  resolveRouteOptions,
} from './utils/options.util.js';

/** A key this process holds while its handler runs. */
export interface ActiveClaim {
  /** The key as the client sent it (validated). */
  readonly key: string;
  readonly cacheKey: string;
  readonly owner: string;
  readonly fingerprint: string;
  readonly ttlMs: number;
  /** The handler (`Controller.method`), for log lines. */
  readonly route: string;
  /** When the key was claimed (epoch ms): renewal stops `maxHoldMs` after it. */
  readonly claimedAt: number;
}

/** The subset of Express and Fastify requests the service reads. */
interface HttpRequestLike {
  method: string;
  url: string;
  originalUrl?: string;
  headers: Record<string, string | string[] | undefined>;
  body?: unknown;
  /** Fastify's request wraps Node's; Express's is Node's. */
  raw?: { readableEnded?: boolean };
  readableEnded?: boolean;
}

const RETRY_AFTER = { 'retry-after': '1' };
/** First pause before a claim that failed is released again; it doubles after each failure. */
const ABANDON_RETRY_MS = 100;

function isResolverClass(identity: IdempotencyIdentity): identity is new (...args: any[]) => IdempotencyIdentityResolver {
  return typeof identity.prototype?.resolve === 'function';
}

/**
 * A body was sent that nothing has read: no body parser took its media type, so `request.body`
 * does not show it and the fingerprint cannot tell two such bodies apart.
 */
function hasUnreadBody(request: HttpRequestLike): boolean {
  const { headers } = request;
  const sent =
    headers['transfer-encoding'] !== undefined || (headers['content-length'] !== undefined && headers['content-length'] !== '0');
  return sent && (request.raw ?? request).readableEnded === false;
}

/**
 * The idempotency protocol, independent of Nest's request pipeline: validate the key, resolve the
 * scope, fingerprint the request, then one store round trip to claim or replay and one to commit.
 */
@Injectable()
export class IdempotencyService implements OnModuleDestroy, OnApplicationShutdown {
  private readonly logger = new Logger('Idempotency');
  private readonly routes = new WeakMap<object, ResolvedRouteOptions>();
  private readonly resolvers = new Map<IdempotencyIdentity, Promise<IdentityFunction>>();
  private readonly held = new Set<ActiveClaim>();
  private renewal: NodeJS.Timeout | undefined;

  constructor(
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) readonly options: ResolvedIdempotencyOptions,
    private readonly moduleRef: ModuleRef,
  ) {}

  /** The options of a decorated handler of `type`, validated and merged once, then cached. */
  routeOptions(type: { name: string }, handler: { name: string }, where = '@Idempotent()'): ResolvedRouteOptions {
    let resolved = this.routes.get(handler);
    if (!resolved) {
      const route = (Reflect.getMetadata(IDEMPOTENT_ROUTE_METADATA, handler) ?? {}) as IdempotentOptions;
      resolved = resolveRouteOptions(where, `${type.name}.${handler.name}`, route, this.options);
      this.routes.set(handler, resolved);
    }
    return resolved;
  }

  /** Instantiates a resolver class ahead of the first request, so a missing dependency fails at startup. */
  async prepareIdentity(identity: IdempotencyIdentity | undefined): Promise<void> {
    if (identity && isResolverClass(identity)) await this.identityFunction(identity);
  }

  /**
   * Claims the request's key. Returns the claim, or `undefined` when the request has no key and the
   * route passes such requests through. Throws an {@link IdempotencyException} (400, 409, 415, 422,
   * 500, 503) or an {@link IdempotentReplay} carrying the stored response.
   */
  async begin(request: HttpRequestLike, context: ExecutionContext, route: ResolvedRouteOptions): Promise<ActiveClaim | undefined> {
    const { headerName, maxKeyLength, maxScopeLength, keyPrefix, store, leaseMs } = this.options;
    const header = request.headers[headerName];
    const key = typeof header === 'string' ? header : header?.join(', ');
    if (key !== undefined && key.length > maxKeyLength) {
      throw new IdempotencyException(400, MESSAGES.tooLong(headerName, maxKeyLength));
    }
    if (key === undefined || key.trim() === '') {
      if (route.missingHeader === 'pass-through') return undefined;
      throw new IdempotencyException(400, MESSAGES.missing(headerName));
    }
    const keyProblem = keyViolation(headerName, key, key.length, maxKeyLength);
    if (keyProblem) throw new IdempotencyException(400, keyProblem);
    if (hasUnreadBody(request)) throw new IdempotencyException(415, MESSAGES.unreadBody);

    let scope = UNSCOPED;
    if (route.identity) {
      const raw = await (await this.identityFunction(route.identity))(request, context);
      if (typeof raw !== 'string' || raw === '') {
        // The server's fault, not the client's: an empty scope would merge every caller into one.
        this.logger.error(`${route.id}: the identity resolver returned ${typeof raw === 'string' ? 'an empty string' : typeof raw}, not a scope; answering 500`);
        throw new IdempotencyException(500, MESSAGES.noScope);
      }
      scope = escapeScope(raw);
      const scopeProblem = keyViolation('identity scope', raw, scope.length, maxScopeLength);
      if (scopeProblem) throw new IdempotencyException(400, scopeProblem);
    }

    let fingerprint: string;
    try {
      fingerprint = requestFingerprint(request.method, request.originalUrl ?? request.url, request.body, route.id);
    } catch (err) {
      if (err instanceof BodyTooDeepError) throw new IdempotencyException(400, MESSAGES.tooDeep);
      throw err;
    }

    const claim: ActiveClaim = {
      key,
      cacheKey: cacheKey(keyPrefix, scope, key),
      owner: randomUUID(),
      fingerprint,
      ttlMs: route.ttlMs,
      route: route.id,
      claimedAt: Date.now(),
    };
    let outcome;
    try {
      outcome = await store.claim(claim.cacheKey, { owner: claim.owner, fingerprint, leaseMs });
    } catch (err) {
      // Fail closed: without the store there is no telling whether this key already ran.
      this.logger.error(`${route.id}: claim failed, answering 503: ${(err as Error).message}`);
      this.abandon(claim);
      throw new IdempotencyException(503, MESSAGES.unavailable, RETRY_AFTER);
    }
    switch (outcome.state) {
      case 'claimed':
        return claim;
      case 'in-flight':
        if (outcome.fingerprint !== fingerprint) throw new IdempotencyException(422, MESSAGES.reused(headerName));
        throw new IdempotencyException(409, MESSAGES.inFlight(headerName), RETRY_AFTER);
      case 'completed':
        if (outcome.record.fingerprint !== fingerprint) throw new IdempotencyException(422, MESSAGES.reused(headerName));
        throw new IdempotentReplay(outcome.record.response);
    }
  }

  /** Stores the response in place of the claim. Never throws: the client gets its response regardless. */
  async commit(claim: ActiveClaim, response: StoredResponse): Promise<void> {
    try {
      const stored = await this.options.store.commit(
        claim.cacheKey,
        claim.owner,
        { fingerprint: claim.fingerprint, response },
        claim.ttlMs,
      );
      if (!stored) this.logger.warn(`${claim.route}: response not stored: the claim had expired and the key was taken over`);
    } catch (err) {
      this.logger.error(`${claim.route}: response not stored, the claim expires with its lease: ${(err as Error).message}`);
    }
  }

  /** Frees the key for a retry. Never throws: a claim that cannot be deleted expires with its lease. */
  async release(claim: ActiveClaim): Promise<void> {
    try {
      await this.options.store.release(claim.cacheKey, claim.owner);
    } catch (err) {
      this.logger.error(`${claim.route}: claim not released, it expires with its lease: ${(err as Error).message}`);
    }
  }

  /**
   * Keeps the claim's lease renewed until {@link unhold}, for at most `maxHoldMs`. One timer serves
   * every held claim; it is started with the first claim and left running (unref'd), so the request
   * path never creates one.
   */
  hold(claim: ActiveClaim): void {
    this.held.add(claim);
    if (this.renewal) return;
    const { leaseMs, maxHoldMs, store } = this.options;
    this.renewal = setInterval(() => {
      const now = Date.now();
      for (const c of this.held) {
        if (now - c.claimedAt >= maxHoldMs) {
          this.held.delete(c);
          this.logger.warn(
            `${c.route}: the handler has held its key for ${maxHoldMs} ms (maxHoldMs) without finishing; the lease is no longer renewed and lapses, after which a retry runs the handler again`,
          );
          continue;
        }
        store.renew(c.cacheKey, c.owner, leaseMs).then(
          (renewed) => renewed || this.logger.warn(`${c.route}: lease lost while the handler was still running`),
          (err: Error) => this.logger.error(`${c.route}: lease renewal failed: ${err.message}`),
        );
      }
    }, Math.floor(leaseMs / 3));
    this.renewal.unref();
  }

  unhold(claim: ActiveClaim): void {
    this.held.delete(claim);
  }

  onModuleDestroy(): void {
    if (this.renewal) clearInterval(this.renewal);
    this.renewal = undefined;
    this.held.clear();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.options.store.close?.();
  }

  /**
   * A claim whose outcome is unknown (the command timed out) may still land in the store later and
   * block the key for a whole lease. Release it, fenced by its owner, as soon as the store answers:
   * retried with a doubling pause until it is answered or the lease would have run out anyway.
   */
  private abandon(claim: ActiveClaim): void {
    const { store, leaseMs } = this.options;
    const attempt = (pause: number): void => {
      store.release(claim.cacheKey, claim.owner).catch(() => {
        if (Date.now() + pause - claim.claimedAt > leaseMs) return;
        setTimeout(attempt, pause, pause * 2).unref();
      });
    };
    attempt(ABANDON_RETRY_MS);
  }

  private identityFunction(identity: IdempotencyIdentity): IdentityFunction | Promise<IdentityFunction> {
    if (!isResolverClass(identity)) return identity as IdentityFunction;
    let resolver = this.resolvers.get(identity);
    if (!resolver) {
      resolver = this.instantiate(identity).then((instance) => instance.resolve.bind(instance));
      this.resolvers.set(identity, resolver);
    }
    return resolver;
  }

  private async instantiate(type: new (...args: any[]) => IdempotencyIdentityResolver): Promise<IdempotencyIdentityResolver> {
    try {
      return this.moduleRef.get(type, { strict: false });
    } catch {
      // Not registered as a provider anywhere: build it with the dependencies the container has.
      return this.moduleRef.create(type);
    }
  }
}
