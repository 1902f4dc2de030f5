import type { Logger } from '@nestjs/common';
import type { Subscriber } from 'rxjs';
import { errorResponse } from '../../shared/exceptions/error.response.js';
import { writeAnswer } from './answer.writer.js';
import { type HandlerEvents, HandlerRun, type ResponseStart, type RunSettlement } from './handler.run.js';
import { LOGS } from '../../shared/messages/operator.messages.js';
import type { ActiveClaim } from '../../shared/interfaces/active-claim.interface.js';
import type { ResolvedIdempotencyOptions } from '../../shared/interfaces/resolved-options.interface.js';
import type { StoredResponse } from '../../shared/interfaces/stored-response.interface.js';
import type { PhaseSettler } from '../../core/phase.settler.js';
import type { PhasedRun } from '../../core/phases/phased.run.js';

/**
 * An `atomicPhases` HTTP run's settle, by what the response did (the rules are the core's
 * `PhaseSettler`): the response that goes out is committed, its bytes waiting for that COMMIT, which
 * when it fails replaces them with the module's 409 or 503. An error that ended the run (a 4xx thrown
 * inside a phase) is answered by the application's filters and stored like a response; any other
 * error frees the key.
 */
export class PhaseSettlement implements RunSettlement, HandlerEvents {
  readonly run: HandlerRun;
  private settled = false;

  constructor(
    private readonly settler: PhaseSettler,
    private readonly options: ResolvedIdempotencyOptions,
    logger: Logger,
    private readonly claim: ActiveClaim,
    private readonly phases: PhasedRun,
    private readonly subscriber: Subscriber<unknown>,
    private readonly start: ResponseStart,
  ) {
    this.run = new HandlerRun(start, claim.route, logger, this, true);
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
    this.settled = true;
    void this.settler.fail(this.claim, this.phases, err).then((answer) => {
      if (!answer) return this.subscriber.error(err);
      writeAnswer(this.start.response, answer, this.options);
      this.subscriber.error(answer);
    });
  }

  complete(): void {
    if (this.run.detached) void this.store(this.run.rendered());
    this.subscriber.complete();
  }

  /** Commits `kept`; resolves to a response to send instead when the commit failed. */
  private store(kept: StoredResponse): Promise<StoredResponse | undefined> {
    if (this.settled) return Promise.resolve(undefined);
    this.settled = true;
    return this.settler.store(this.claim, this.phases, kept).then((answer) => answer && errorResponse(answer, this.options));
  }

  private giveUp(why: string): void {
    if (this.settled) return;
    this.settled = true;
    void this.settler.giveUp(this.claim, this.phases, why);
  }
}
