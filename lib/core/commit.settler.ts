import { Injectable } from '@nestjs/common';
import type { ActiveClaim } from '../shared/interfaces/active-claim.interface.js';
import type { IdempotencyOutcome } from '../shared/interfaces/idempotency-event.interface.js';
import type { StoredResponse } from '../shared/interfaces/stored-response.interface.js';
import { IdempotencyService } from './idempotency.service.js';
import { LeaseRenewer } from './lease.renewer.js';

/**
 * How a run that is neither transactional nor phased settles its claim, for every surface: the lease
 * is held from the run's start; what the run came to is committed, the lease held (and renewed) while
 * a failed commit is tried again in the background; a thrown error, or a result that cannot be
 * stored, frees the key so a retry runs again.
 */
@Injectable()
export class CommitSettler {
  constructor(
    private readonly service: IdempotencyService,
    private readonly leases: LeaseRenewer,
  ) {}

  /** Keeps the claim's lease renewed until it settles. */
  hold(claim: ActiveClaim): void {
    this.leases.hold(claim);
  }

  commit(claim: ActiveClaim, response: StoredResponse): Promise<void> {
    return this.service.commit(claim, response, () => this.leases.unhold(claim));
  }

  /** Frees the key; `outcome` says why in events (`'released'` after an error, `'not-stored'` when given up). */
  release(claim: ActiveClaim, outcome?: IdempotencyOutcome): Promise<void> {
    return this.service.release(claim, outcome).finally(() => this.leases.unhold(claim));
  }

  /** The whole plain run of a surface without a response to record (the inbox, message handlers, GraphQL). */
  async run<T>(claim: ActiveClaim, work: () => Promise<T>, record: (value: T) => StoredResponse): Promise<T> {
    this.hold(claim);
    let value: T;
    try {
      value = await work();
    } catch (err) {
      await this.release(claim);
      throw err;
    }
    await this.commit(claim, record(value));
    return value;
  }
}
