import { Injectable, Logger } from '@nestjs/common';
import { OutcomeReporter } from './events/outcome.reporter.js';
import { IdempotencyException } from '../shared/exceptions/idempotency.exception.js';
import { LeaseLost } from '../shared/exceptions/lease-lost.error.js';
import { MESSAGES } from '../shared/messages/client.messages.js';
import { LOGS } from '../shared/messages/operator.messages.js';
import { IdempotencyService } from './idempotency.service.js';
import type { ActiveClaim } from '../shared/interfaces/active-claim.interface.js';
import { ABORTED, ROLLED_BACK, sqlState } from './transactions/sql-states.js';

/** How far a failed transaction got: opened, the work failed inside it, the completion ran. */
export interface TransactionState {
  readonly started: boolean;
  readonly failed: boolean;
  readonly completed: boolean;
}

const reason = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/**
 * What a failed transaction of a transactional route or of `IdempotencyInbox` comes to: the key freed
 * when its writes are known to be rolled back, kept when COMMIT may have landed, and the module's error
 * for the caller (`undefined` when the work's own error is the answer).
 */
@Injectable()
export class TransactionFailures {
  private readonly logger = new Logger('Idempotency');

  constructor(
    private readonly service: IdempotencyService,
    private readonly reporter: OutcomeReporter,
  ) {}

  /**
   * The answer to work whose own statement lost a serialization conflict or a deadlock: its writes are
   * rolled back and a retry may well succeed, so the caller hears 409 (retry) rather than the error.
   */
  retryable(err: unknown): IdempotencyException | undefined {
    return ROLLED_BACK.has(sqlState(err)) ? IdempotencyException.of('not-committed', MESSAGES.notCommitted) : undefined;
  }

  /** `keyName` names the key in the timed-out message: the key header on HTTP. */
  async settle(
    claim: ActiveClaim,
    err: unknown,
    state: TransactionState,
    keyName: string,
  ): Promise<IdempotencyException | undefined> {
    if (state.failed) {
      // The work threw: its writes are rolled back, so a retry runs it again.
      await this.service.release(claim);
      return undefined;
    }
    if (!state.started) {
      // No transaction, so no work: BEGIN failed.
      return this.service.unavailable(claim, LOGS.beginFailed(claim.route, reason(err)));
    }
    if (err instanceof LeaseLost) {
      // Not ours any more: the request that took the key over answers retries.
      this.logger.warn(LOGS.transactionLost(claim.route));
      const timedOut = IdempotencyException.of('transaction-timed-out', MESSAGES.transactionTimedOut(keyName));
      this.reporter.settled(claim, 'not-stored', timedOut);
      return timedOut;
    }
    if (!state.completed && sqlState(err) === ABORTED) {
      // Deterministic: every attempt would abort the same way. Not retryable, and the key is freed.
      this.logger.error(LOGS.transactionAborted(claim.route, reason(err)));
      const aborted = IdempotencyException.of('transaction-aborted', MESSAGES.transactionAborted);
      await this.service.release(claim, 'released', aborted);
      return aborted;
    }
    const notCommitted = IdempotencyException.of('not-committed', MESSAGES.notCommitted);
    if (state.completed && !ROLLED_BACK.has(sqlState(err))) {
      // COMMIT was sent and may have landed: releasing could let a retry run the work twice.
      this.logger.error(LOGS.commitUnknown(claim.route, reason(err)));
      this.reporter.settled(claim, 'not-stored', notCommitted);
    } else {
      this.logger.error(LOGS.transactionRolledBack(claim.route, reason(err)));
      await this.service.release(claim, 'released', notCommitted);
    }
    return notCommitted;
  }
}
