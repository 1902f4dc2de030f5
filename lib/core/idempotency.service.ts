import { Inject, Injectable, Logger } from '@nestjs/common';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../shared/idempotency.constants.js';
import { MESSAGES } from '../shared/messages/client.messages.js';
import { LOGS } from '../shared/messages/operator.messages.js';
import { IdempotencyException } from '../shared/exceptions/idempotency.exception.js';
import { IdempotencyObserver } from './events/idempotency.observer.js';
import { OutcomeReporter } from './events/outcome.reporter.js';
import { readKey } from './idempotency-key.reader.js';
import type { IdempotencyOutcome } from '../shared/interfaces/idempotency-event.interface.js';
import type { ActiveClaim } from '../shared/interfaces/active-claim.interface.js';
import type { IdempotencyContext } from '../shared/interfaces/idempotency-context.interface.js';
import type { ResolvedIdempotencyOptions, ResolvedRouteOptions } from '../shared/interfaces/resolved-options.interface.js';
import type { StoredResponse } from '../shared/interfaces/stored-response.interface.js';
import { RecordBuilder } from './record.builder.js';
import { RecordCommitter } from './record.committer.js';
import { storeKey } from '../shared/utils/key.util.js';
import { DuplicateWaiters } from './waiting/duplicate.waiters.js';
import { KeyClaimer, type Seen } from './key.claimer.js';
import { openClaim } from './claim.opener.js';
import { LeaseLost } from '../shared/exceptions/lease-lost.error.js';
import type { SqlExecutor } from '../shared/interfaces/idempotency-transactions.interface.js';

/** Written to, never read: nothing observes outcomes. */
const UNOBSERVED: Seen = { key: undefined, storeMs: 0 };

/**
 * The core's claim and its plain settle: one store round trip to claim the key (or to learn that it
 * is in flight, reused, or done and to be replayed), one to commit the response or release the key.
 * Every surface claims through it (the completer through the same `KeyClaimer`); the transactional
 * and phased modes settle through their own settlers (`transaction.settler.ts`, `phase.settler.ts`),
 * which use its release. The key, the scope, the fingerprint, the claim and the record each come
 * from a helper of their own.
 */
@Injectable()
export class IdempotencyService {
  private readonly logger = new Logger('Idempotency');

  constructor(
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) readonly options: ResolvedIdempotencyOptions,
    private readonly observer: IdempotencyObserver,
    private readonly records: RecordBuilder,
    private readonly reporter: OutcomeReporter,
    private readonly committer: RecordCommitter,
    private readonly claimer: KeyClaimer,
    private readonly waiters: DuplicateWaiters,
  ) {}

  /**
   * Claims the request's key. Returns the claim, or `undefined` when the request has no key and the
   * route passes such requests through. Throws an {@link IdempotencyException} (400, 409, 415, 422,
   * 500, 503) or an `IdempotentReplay` carrying the stored response.
   */
  begin(call: IdempotencyContext, route: ResolvedRouteOptions): Promise<ActiveClaim | undefined> {
    if (!this.observer.enabled) return this.decide(call, route, UNOBSERVED);
    const seen: Seen = { key: undefined, storeMs: 0 };
    return this.decide(call, route, seen).then(
      (claim) => {
        if (!claim) this.reporter.bypassed(route.id, call.method);
        return claim;
      },
      (err: unknown) => {
        this.reporter.answered(err, { route: route.id, method: call.method, storeMs: seen.storeMs, key: seen.key });
        throw err;
      },
    );
  }

  private async decide(call: IdempotencyContext, route: ResolvedRouteOptions, seen: Seen): Promise<ActiveClaim | undefined> {
    const { headerName, keyPrefix } = this.options;
    const key = readKey(call.sentKey(headerName), this.options, call.headerKey);
    if (key === undefined) {
      if (route.missingHeader === 'pass-through') return undefined;
      throw IdempotencyException.of('key-missing', MESSAGES.missing(headerName));
    }
    call.check();

    seen.key = key;
    const scoped = call.scope(route);
    const scope = typeof scoped === 'string' ? scoped : await scoped;
    const made = call.fingerprint(route);
    const fingerprint = typeof made === 'string' ? made : await made;

    const onSettled = route.waitMs > 0 ? this.waiters.settled : undefined;
    const claim = openClaim(key, storeKey(keyPrefix, scope, key), fingerprint, route, call.method, onSettled);
    return this.claimer.claim(call, route, claim, seen);
  }

  /** The answer to a request with a key while the application shuts down: its client retries elsewhere. */
  shuttingDown(): IdempotencyException {
    return IdempotencyException.of('shutting-down', MESSAGES.shuttingDown);
  }

  /**
   * Stores the response in place of the claim. Never throws: the client gets its response regardless.
   * Resolves after the first attempt; a commit that failed (the store restarted, a lock was held) is
   * tried again in the background for as long as the lease is held. `settled` is called once the
   * key's fate is decided, stored or given up.
   */
  async commit(claim: ActiveClaim, response: StoredResponse, settled?: () => void): Promise<void> {
    claim.settling = true;
    await this.committer.commit(claim, this.records.record(claim, response), response.status, settled);
  }

  /**
   * The fenced completion of the claim as the last statement of the application's transaction, so the
   * record commits with the work's writes or not at all. Throws `LeaseLost` when the claim is not ours
   * any more (its lease ran out and another request took the key).
   */
  async completeIn(sql: SqlExecutor, claim: ActiveClaim, response: StoredResponse): Promise<void> {
    const startedAt = this.observer.now();
    const { storeKey, owner, ttlMs } = claim;
    const done = await this.options.store.completeIn!(sql, storeKey, owner, this.records.record(claim, response), ttlMs);
    claim.storeMs += this.observer.stored('commit', startedAt);
    if (!done) throw new LeaseLost();
  }

  /**
   * Fails closed once a claim is held but the store cannot say what the key holds (BEGIN failed, the
   * recovery point is unreadable): logs `why` at error level, frees the key and answers 503.
   */
  async unavailable(claim: ActiveClaim, why: string): Promise<IdempotencyException> {
    this.logger.error(why);
    const answer = IdempotencyException.of('store-unavailable', MESSAGES.unavailable);
    await this.release(claim, 'store-unavailable', answer);
    return answer;
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
      await this.options.store.release(claim.storeKey, claim.owner);
    } catch (err) {
      failed = err;
      this.logger.error(LOGS.releaseFailed(claim.route, (err as Error).message));
    }
    claim.storeMs += this.observer.stored('release', startedAt, failed);
    this.reporter.settled(claim, outcome, answer);
  }
}
