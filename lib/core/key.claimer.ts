import { Inject, Injectable, Logger } from '@nestjs/common';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../shared/idempotency.constants.js';
import { MESSAGES } from '../shared/messages/client.messages.js';
import { LOGS } from '../shared/messages/operator.messages.js';
import { IdempotencyException } from '../shared/exceptions/idempotency.exception.js';
import { IdempotentReplay } from '../shared/exceptions/idempotent-replay.exception.js';
import { IdempotencyObserver } from './events/idempotency.observer.js';
import type { ActiveClaim } from '../shared/interfaces/active-claim.interface.js';
import type { IdempotencyContext } from '../shared/interfaces/idempotency-context.interface.js';
import type { ClaimOutcome } from '../stores/contract/idempotency-store.interface.js';
import type { ResolvedIdempotencyOptions, ResolvedRouteOptions } from '../shared/interfaces/resolved-options.interface.js';
import { RecordBuilder } from './record.builder.js';
import { DuplicateWaiters } from './waiting/duplicate.waiters.js';

/** What `IdempotencyService.begin` learns on the way that an outcome needs. */
export interface Seen {
  key: string | undefined;
  storeMs: number;
}

/**
 * When a waiting duplicate looks at the key again although nothing woke it: after a lease, when an
 * owner that died (and so never settles) has let its claim lapse, plus up to a quarter of a lease of
 * jitter, so the waiters of many processes do not all ask at once.
 */
const leaseLook = (leaseMs: number): number => Date.now() + leaseMs * (1 + Math.random() / 4);

/** First pause before a claim that failed is released again; it doubles after each failure. */
const ABANDON_RETRY_MS = 100;

/**
 * The claim of a key and what its answer means: the key is ours, in flight (409, or a wait with
 * `inFlight: 'wait'`), reused (422), done (the replay) or unreadable (503); and the clean-up of a
 * claim whose fate is unknown.
 */
@Injectable()
export class KeyClaimer {
  private readonly logger = new Logger('Idempotency');

  constructor(
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly observer: IdempotencyObserver,
    private readonly records: RecordBuilder,
    private readonly waiters: DuplicateWaiters,
  ) {}

  /** Claims `claim`'s key: the claim when the key was free, else the answer thrown. */
  async claim(call: IdempotencyContext, route: ResolvedRouteOptions, claim: ActiveClaim, seen: Seen): Promise<ActiveClaim> {
    return this.decideOn(call, route, claim, await this.claimKey(claim, seen), seen);
  }

  /** One claim round trip for a request: a store that fails answers this request 503. */
  private async claimKey(claim: ActiveClaim, seen: Seen): Promise<ClaimOutcome> {
    try {
      return await this.take(claim, seen);
    } catch (err) {
      // Fail closed: without the store there is no telling whether this key already ran.
      this.logger.error(LOGS.claimFailed(claim.route, (err as Error).message));
      throw IdempotencyException.of('store-unavailable', MESSAGES.unavailable);
    }
  }

  /**
   * One claim round trip, the store's answer as it is: what the completer, which has no request to
   * answer, claims a run with. A store that fails throws its error, and the claim is released as soon
   * as the store answers again.
   */
  async take(claim: ActiveClaim, seen: Seen = { key: undefined, storeMs: 0 }): Promise<ClaimOutcome> {
    const startedAt = this.observer.now();
    try {
      const { owner, fingerprint, leaseMs } = claim;
      const outcome = await this.options.store.claim(claim.storeKey, { owner, fingerprint, leaseMs });
      claim.storeMs = seen.storeMs += this.observer.stored('claim', startedAt);
      return outcome;
    } catch (err) {
      seen.storeMs += this.observer.stored('claim', startedAt, err);
      this.releaseWhenAnswered(claim);
      throw err;
    }
  }

  /** Frees a claim nothing was run under, and wakes its waiters. Never throws: a claim left behind lapses with its lease. */
  async free(claim: ActiveClaim): Promise<void> {
    await this.options.store.release(claim.storeKey, claim.owner).catch(() => undefined);
    this.waiters.settled(claim.storeKey);
  }

  private decideOn(
    call: IdempotencyContext,
    route: ResolvedRouteOptions,
    claim: ActiveClaim,
    outcome: ClaimOutcome,
    seen: Seen,
    waited = false,
  ): Promise<ActiveClaim> | ActiveClaim {
    const { headerName } = this.options;
    switch (outcome.state) {
      case 'claimed':
        // Woken during a graceful shutdown: a handler started now would outlive the store.
        if (waited && this.waiters.closing) return this.giveBack(claim);
        // On the span now, while it is open for sure: a first run's end (released, not-stored) replaces it if it still is.
        this.observer.mark('executed');
        return claim;
      case 'in-flight':
        if (!call.matches(outcome.fingerprint, claim.fingerprint, route))
          throw IdempotencyException.of('key-reused', MESSAGES.reused(headerName));
        if (route.waitMs > 0 && !waited) return this.waitFor(call, route, claim, seen);
        throw IdempotencyException.of('key-in-flight', MESSAGES.inFlight(headerName));
      case 'completed':
        if (!call.matches(outcome.record.fingerprint, claim.fingerprint, route)) {
          // A sealed record's fingerprint is authenticated with it: one altered in the store is
          // unreadable (503), not a reused key (422).
          if (outcome.record.sealed) this.records.response(claim.storeKey, outcome.record, route);
          throw IdempotencyException.of('key-reused', MESSAGES.reused(headerName));
        }
        throw new IdempotentReplay(this.records.response(claim.storeKey, outcome.record, route));
      case 'unreadable':
        throw this.records.unreadable(route, outcome.reason);
    }
  }

  /**
   * `inFlight: 'wait'`: looks at the key again once registered as its waiter (a settle in between is
   * not missed), then each time it settles anywhere, about once a lease (an owner that died never
   * settles: its lease lapses, and one look claims the key and runs the handler while the others wait
   * for it), and once more when the wait runs out (an announcement may have been lost); decided as
   * usual then, a key still in flight answering 409.
   */
  private async waitFor(
    call: IdempotencyContext,
    route: ResolvedRouteOptions,
    claim: ActiveClaim,
    seen: Seen,
  ): Promise<ActiveClaim> {
    const waiter = await this.waiters.enter(claim.storeKey, route.waitMs);
    if (!waiter) throw IdempotencyException.of('key-in-flight', MESSAGES.inFlight(this.options.headerName));
    try {
      for (let woken = true; ; woken = await waiter.next(leaseLook(route.leaseMs))) {
        const again = { ...claim, claimedAt: Date.now() };
        // Another waiter of this process won the key with its look: this one waits for its settle.
        const outcome = (await this.waiters.look(claim.storeKey, () => this.claimKey(again, seen))) ?? {
          state: 'in-flight',
          fingerprint: claim.fingerprint,
        };
        if (!woken || outcome.state !== 'in-flight' || !call.matches(outcome.fingerprint, claim.fingerprint, route))
          return await this.decideOn(call, route, again, outcome, seen, true);
      }
    } finally {
      this.waiters.leave(waiter);
    }
  }

  private async giveBack(claim: ActiveClaim): Promise<never> {
    await this.free(claim);
    throw IdempotencyException.of('shutting-down', MESSAGES.shuttingDown);
  }

  /**
   * A claim whose outcome is unknown (the command timed out) may still land in the store later and
   * block the key for a whole lease. Release it, fenced by its owner, as soon as the store answers:
   * retried with a doubling pause until it is answered or the lease would have run out anyway.
   */
  private releaseWhenAnswered(claim: ActiveClaim): void {
    const { store } = this.options;
    const attempt = (pause: number): void => {
      store.release(claim.storeKey, claim.owner).catch(() => {
        if (Date.now() + pause - claim.claimedAt > claim.leaseMs) return;
        setTimeout(attempt, pause, pause * 2).unref();
      });
    };
    attempt(ABANDON_RETRY_MS);
  }
}
