import type { Logger } from '@nestjs/common';
import type { Subscriber } from 'rxjs';
import { type HandlerEvents, HandlerRun, type ResponseStart, type RunSettlement } from './handler.run.js';
import { LOGS } from '../../shared/messages/operator.messages.js';
import type { CommitSettler } from '../../core/commit.settler.js';
import type { ActiveClaim } from '../../shared/interfaces/active-claim.interface.js';
import type { StoredResponse } from '../../shared/interfaces/stored-response.interface.js';

/**
 * A plain HTTP run's settle, by what the response did: what went out is committed, a thrown error
 * releases the key, a stream gives it up (the rules themselves are the core's `CommitSettler`). One
 * object per request, not a closure per step: this runs on every first request.
 */
export class CommitSettlement implements RunSettlement, HandlerEvents {
  readonly run: HandlerRun;
  /** The key was committed, released or given up. */
  private settled = false;

  constructor(
    private readonly settler: CommitSettler,
    private readonly logger: Logger,
    private readonly claim: ActiveClaim,
    private readonly subscriber: Subscriber<unknown>,
    start: ResponseStart,
  ) {
    this.run = new HandlerRun(start, claim.route, logger, this);
  }

  ended(stored: StoredResponse): Promise<void> {
    return this.commit(stored);
  }

  // A compressed Fastify reply is stored as its handler's value; a replay goes through the reply, and
  // the plugin encodes it as the retry negotiates.
  streamed(): void {
    if (this.run.encodedByFastify()) void this.storeResult();
    else this.giveUp(LOGS.streamed);
  }

  stream(): boolean {
    this.run.stop();
    this.giveUp(LOGS.returnedStream);
    return true;
  }

  // A thrown error frees the key before the error response goes out, so a retry runs again.
  error(err: unknown): void {
    this.run.stop();
    this.settled = true;
    void this.settler.release(this.claim).then(() => this.subscriber.error(err));
  }

  complete(): void {
    if (this.run.detached) void this.storeResult();
    this.subscriber.complete();
  }

  private commit(stored: StoredResponse): Promise<void> {
    this.settled = true;
    return this.settler.commit(this.claim, stored);
  }

  private giveUp(why: string): void {
    if (this.settled) return;
    this.logger.warn(LOGS.givenUp(this.claim.route, why));
    this.settled = true;
    void this.settler.release(this.claim, 'not-stored');
  }

  // The handler's own result, as its adapter would have sent it. A stream has been given up on
  // already, as it was emitted.
  private storeResult(): Promise<void> {
    return this.settled ? Promise.resolve() : this.commit(this.run.rendered());
  }
}
