import { Inject, Injectable, Logger } from '@nestjs/common';
import { IdempotencyObserver } from './events/idempotency.observer.js';
import { OutcomeReporter } from './events/outcome.reporter.js';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../shared/idempotency.constants.js';
import { LOGS } from '../shared/messages/operator.messages.js';
import type { ActiveClaim } from '../shared/interfaces/active-claim.interface.js';
import type { IdempotencyRecord } from '../stores/contract/idempotency-store.interface.js';
import type { ResolvedIdempotencyOptions } from '../shared/interfaces/resolved-options.interface.js';

/** First pause before a failed commit is tried again; it doubles up to {@link MAX_COMMIT_RETRY_MS}. */
const COMMIT_RETRY_MS = 100;
const MAX_COMMIT_RETRY_MS = 2_000;

/**
 * The fenced commit of a record in place of its claim, and its retries while the lease is held: a
 * store outage shorter than the lease never lets a retry of the request run the handler again.
 */
@Injectable()
export class RecordCommitter {
  private readonly logger = new Logger('Idempotency');

  constructor(
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly observer: IdempotencyObserver,
    private readonly reporter: OutcomeReporter,
  ) {}

  /**
   * Resolves after the first attempt, so the response waits for one store round trip only; a failed
   * one is tried again in the background. `settled` is called once the key's fate is decided.
   */
  async commit(claim: ActiveClaim, record: IdempotencyRecord, status: number, settled?: () => void): Promise<void> {
    const first = await this.attempt(claim, record);
    if (first === undefined) {
      void this.retry(claim, record, status).finally(settled);
      return;
    }
    this.committed(claim, first, status);
    settled?.();
  }

  /** One fenced commit: `true` stored, `false` the claim was not ours any more, `undefined` the store failed. */
  private async attempt(claim: ActiveClaim, record: IdempotencyRecord): Promise<boolean | undefined> {
    const startedAt = this.observer.now();
    try {
      const stored = await this.options.store.commit(claim.storeKey, claim.owner, record, claim.ttlMs);
      claim.storeMs += this.observer.stored('commit', startedAt);
      return stored;
    } catch (err) {
      claim.storeMs += this.observer.stored('commit', startedAt, err);
      this.logger.warn(LOGS.commitRetrying(claim.route, (err as Error).message));
      return undefined;
    }
  }

  /** With a doubling pause, while the lease is held (the renewer keeps renewing it meanwhile). */
  private async retry(claim: ActiveClaim, record: IdempotencyRecord, status: number): Promise<void> {
    // For one lease at most: a commit the store keeps refusing while it renews (a value it cannot
    // take) must not hold the key until maxHoldMs.
    const deadline = Date.now() + claim.leaseMs;
    for (let pause = COMMIT_RETRY_MS; ; pause = Math.min(pause * 2, MAX_COMMIT_RETRY_MS)) {
      // A commit past the lease still lands if nobody took the key over, so the lease does not end the
      // retries; a renewal that found the claim taken does.
      let giveUp = Date.now() + pause >= deadline;
      if (!giveUp) {
        await new Promise((r) => setTimeout(r, pause));
        giveUp = claim.lost === true;
      }
      if (giveUp) {
        this.logger.error(LOGS.commitFailed(claim.route));
        this.reporter.settled(claim, 'not-stored', status);
        return;
      }
      const stored = await this.attempt(claim, record);
      if (stored !== undefined) {
        if (stored) this.logger.log(LOGS.committedLate(claim.route));
        this.committed(claim, stored, status);
        return;
      }
    }
  }

  private committed(claim: ActiveClaim, stored: boolean, status: number): void {
    if (!stored) this.logger.warn(LOGS.takenOver(claim.route));
    this.reporter.settled(claim, stored ? 'executed' : 'not-stored', status);
  }
}
