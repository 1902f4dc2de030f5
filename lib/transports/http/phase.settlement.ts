import type { Logger } from '@nestjs/common';
import type { Subscriber } from 'rxjs';
import { errorResponse } from '../../shared/exceptions/error.response.js';
import { IdempotencyException } from '../../shared/exceptions/idempotency.exception.js';
import { LeaseLost } from '../../shared/exceptions/lease-lost.error.js';
import { writeAnswer } from './answer.writer.js';
import { type HandlerEvents, HandlerRun, type ResponseStart, type RunSettlement } from './handler.run.js';
import type { OutcomeReporter } from '../../core/events/outcome.reporter.js';
import { LOGS } from '../../shared/messages/operator.messages.js';
import type { IdempotencyService } from '../../core/idempotency.service.js';
import type { ActiveClaim } from '../../shared/interfaces/active-claim.interface.js';
import type { ResolvedIdempotencyOptions } from '../../shared/interfaces/resolved-options.interface.js';
import type { StoredResponse } from '../../shared/interfaces/stored-response.interface.js';
import type { LeaseRenewer } from '../../core/lease.renewer.js';
import type { PhasedRun } from '../../core/phases/phased.run.js';
import type { TransactionFailures } from '../../core/transaction.failures.js';

/** What a phased run's settlement works with: the runner's collaborators. */
export interface PhaseSettlementDeps {
  readonly options: ResolvedIdempotencyOptions;
  readonly service: IdempotencyService;
  readonly leases: LeaseRenewer;
  readonly failures: TransactionFailures;
  readonly reporter: OutcomeReporter;
  readonly logger: Logger;
}

/**
 * How an `atomicPhases` run settles its claim. The response that goes out is committed with the
 * recovery point's deletion (in `finish()`'s open transaction, else in one of its own), and its bytes
 * wait for that COMMIT: a failed one replaces them with a 409 or 503. An error that ended the run (a
 * 4xx thrown inside a phase) is answered by the application's filters and stored like a response.
 * Any other error frees the key and leaves the recovery point where it was, for the retry to resume.
 */
export class PhaseSettlement implements RunSettlement, HandlerEvents {
  readonly run: HandlerRun;
  private settled = false;

  constructor(
    private readonly deps: PhaseSettlementDeps,
    private readonly claim: ActiveClaim,
    private readonly phases: PhasedRun,
    private readonly subscriber: Subscriber<unknown>,
    private readonly start: ResponseStart,
  ) {
    this.run = new HandlerRun(start, claim.route, deps.logger, this, true);
  }

  ended(kept: StoredResponse): Promise<StoredResponse | undefined> {
    return this.store(kept);
  }

  streamed(): void {
    if (this.run.encodedByFastify()) void this.store(this.run.rendered());
    else this.giveUp(LOGS.streamed);
  }

  stream(): boolean {
    this.run.stop();
    this.giveUp(LOGS.returnedStream);
    return true;
  }

  error(err: unknown): void {
    if (err !== undefined && err === this.phases.endedBy) {
      // The filters' answer to it reaches end() and is stored: a retry gets it again.
      this.run.keepsError = true;
      this.subscriber.error(err);
      return;
    }
    this.run.stop();
    this.phases.abandon(err);
    void this.fail(err);
  }

  complete(): void {
    if (this.run.detached) void this.store(this.run.rendered());
    this.subscriber.complete();
  }

  /** Commits `kept`; resolves to a response to send instead when the commit failed. */
  private store(kept: StoredResponse): Promise<StoredResponse | undefined> {
    if (this.settled) return Promise.resolve(undefined);
    this.settled = true;
    const { claim, phases, deps } = this;
    return phases
      .settle(kept)
      .then(
        () => void deps.reporter.settled(claim, 'executed', kept.status),
        (err: unknown) =>
          deps.failures
            .settle(claim, err, { started: true, failed: false, completed: phases.completed }, deps.options.headerName)
            .then((answer) => answer && errorResponse(answer, deps.options)),
      )
      .finally(() => deps.leases.unhold(claim));
  }

  /** The handler failed: the key is freed for a retry, unless another request holds it now. */
  private async fail(err: unknown): Promise<void> {
    this.settled = true;
    const { claim, deps } = this;
    const lost = err instanceof LeaseLost;
    let answer: IdempotencyException | undefined;
    try {
      answer = await deps.failures.settle(
        claim,
        err,
        { started: true, failed: !lost, completed: false },
        deps.options.headerName,
      );
    } finally {
      deps.leases.unhold(claim);
    }
    // A phase's transaction lost a serialization conflict or a deadlock: a retry resumes there.
    answer ??= deps.failures.retryable(err);
    if (!answer) return this.subscriber.error(err);
    writeAnswer(this.start.response, answer, deps.options);
    this.subscriber.error(answer);
  }

  private giveUp(why: string): void {
    if (this.settled) return;
    this.settled = true;
    const { claim, deps } = this;
    deps.logger.warn(LOGS.givenUp(claim.route, why));
    this.phases.abandon(new Error(LOGS.givenUp(claim.route, why)));
    void deps.service.release(claim, 'not-stored').finally(() => deps.leases.unhold(claim));
  }
}
