import { Inject, Injectable, Logger } from '@nestjs/common';
import { OutcomeReporter } from './events/outcome.reporter.js';
import { IdempotencyException } from '../shared/exceptions/idempotency.exception.js';
import { LeaseLost } from '../shared/exceptions/lease-lost.error.js';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../shared/idempotency.constants.js';
import { MESSAGES } from '../shared/messages/client.messages.js';
import { LOGS } from '../shared/messages/operator.messages.js';
import type { ActiveClaim } from '../shared/interfaces/active-claim.interface.js';
import type { RecoveryPoint } from '../shared/interfaces/recovery-point.interface.js';
import type { ResolvedIdempotencyOptions } from '../shared/interfaces/resolved-options.interface.js';
import type { StoredResponse } from '../shared/interfaces/stored-response.interface.js';
import { IdempotencyService } from './idempotency.service.js';
import { LeaseRenewer } from './lease.renewer.js';
import { RecordBuilder } from './record.builder.js';
import { TransactionFailures } from './transaction.failures.js';
import { PhasedRun } from './phases/phased.run.js';

/**
 * The `phases` way a claim settles (`atomicPhases`), for every surface. A claimed key resumes from its
 * recovery point; the lease is held while the handler runs (each phase's commit renews it too). What
 * the run came to is committed with the recovery point's deletion, and a failed COMMIT is answered as
 * a transactional one is. Any other error frees the key and leaves the recovery point where it was,
 * for the retry to resume. A transport calls one of `store`, `fail` or `giveUp` once per run.
 */
@Injectable()
export class PhaseSettler {
  private readonly logger = new Logger('Idempotency');

  constructor(
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly service: IdempotencyService,
    private readonly records: RecordBuilder,
    private readonly leases: LeaseRenewer,
    private readonly failures: TransactionFailures,
    private readonly reporter: OutcomeReporter,
  ) {}

  /**
   * The run of a claimed key, with what earlier attempts committed; `matches` tells whether a
   * recovery point's fingerprint is this request's. Throws, the key released, a 422 when the
   * recovery point is another request's, a 503 when it cannot be read.
   */
  async resume(claim: ActiveClaim, matches: (fingerprint: string) => boolean): Promise<PhasedRun> {
    const { store, transactions, headerName } = this.options;
    let point: RecoveryPoint | undefined;
    try {
      point = await store.recoveryPoint!(claim.storeKey);
    } catch (err) {
      throw await this.service.unavailable(claim, LOGS.recoveryPointUnread(claim.route, (err as Error).message));
    }
    if (point && !matches(point.fingerprint)) {
      const reused = IdempotencyException.of('key-reused', MESSAGES.reused(headerName));
      await this.service.release(claim, 'mismatch', reused);
      throw reused;
    }
    return new PhasedRun(claim, point, { transactions: transactions!, store, record: (r) => this.records.record(claim, r) });
  }

  /** Keeps the claim's lease renewed until it settles. */
  hold(claim: ActiveClaim): void {
    this.leases.hold(claim);
  }

  /**
   * Commits `kept` with the recovery point's deletion. Resolves to the module's answer to send instead
   * when that failed (409 or 503), else to `undefined`.
   */
  store(claim: ActiveClaim, phases: PhasedRun, kept: StoredResponse): Promise<IdempotencyException | undefined> {
    const { headerName } = this.options;
    return phases
      .settle(kept)
      .then(
        () => void this.reporter.settled(claim, 'executed', kept.status),
        (err: unknown) =>
          this.failures.settle(claim, err, { started: true, failed: false, completed: phases.completed }, headerName),
      )
      .finally(() => this.leases.unhold(claim));
  }

  /**
   * The handler failed: the key is freed for a retry, unless another request holds it now. Resolves to
   * the module's answer, or `undefined` when the handler's own error is the answer.
   */
  async fail(claim: ActiveClaim, phases: PhasedRun, err: unknown): Promise<IdempotencyException | undefined> {
    phases.abandon(err);
    let answer: IdempotencyException | undefined;
    try {
      const state = { started: true, failed: !(err instanceof LeaseLost), completed: false };
      answer = await this.failures.settle(claim, err, state, this.options.headerName);
    } finally {
      this.leases.unhold(claim);
    }
    // A phase's transaction lost a serialization conflict or a deadlock: a retry resumes there.
    return answer ?? this.failures.retryable(err);
  }

  /** What the run came to cannot be stored (`why`): the key is freed, and a waiting `finish()` fails. */
  giveUp(claim: ActiveClaim, phases: PhasedRun, why: string): Promise<void> {
    const given = LOGS.givenUp(claim.route, why);
    this.logger.warn(given);
    phases.abandon(new Error(given));
    return this.service.release(claim, 'not-stored').finally(() => this.leases.unhold(claim));
  }
}
