import { TransactionHost } from '@nestjs-cls/transactional';
import type { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Injectable } from '@nestjs/common';
import { type PhasedRun, PhasedWorkflow } from '../../lib/index.js';
import { Faults } from './faults.js';
import { PaymentProvider } from './payment.provider.js';
import { Ride } from './ride.entity.js';

/** What a rider asks for. */
export interface BookRide {
  origin: string;
  destination: string;
  amount: number;
  currency: string;
}

/** All a booking needs, as JSON: what the completer runs it again with. */
export interface RideBooking extends BookRide {
  accountId: string;
}

/**
 * Books a ride in three atomic phases, as rocket-rides-atomic does: the ride, the charge at the
 * payment provider (with a key derived from the request's), the receipt. Each phase commits with the
 * key's recovery point; a retry after a crash resumes at the first phase not committed, and a run
 * nobody comes back for is finished by the completer (COMPLETER_INTERVAL_MS).
 */
@Injectable()
export class RidesService {
  constructor(
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    private readonly provider: PaymentProvider,
    private readonly faults: Faults,
  ) {}

  @PhasedWorkflow('book-ride')
  async book(run: PhasedRun, ride: RideBooking): Promise<object> {
    // Inside a phase, txHost.tx is the phase's transaction: the row commits with the recovery point.
    const created = await run.phase('ride_created', async () => {
      const saved = await this.txHost.tx.getRepository(Ride).save({ ...ride, chargeId: null });
      return { id: saved.id };
    });
    this.faults.at('after:ride_created');
    const chargeId = await run.foreign(
      'charge_created',
      (key) => this.provider.charge(ride.amount, ride.currency, key),
      async (_sql, charge) => {
        this.faults.at('before-record:charge_created');
        await this.txHost.tx.getRepository(Ride).update(created.id, { chargeId: charge.id });
        return charge.id;
      },
    );
    this.faults.at('after:charge_created');
    return run.finish(async () => {
      await this.txHost.tx.getRepository(Ride).update(created.id, { receiptQueued: true });
      return { id: `ride_${created.id}`, chargeId, amount: ride.amount, currency: ride.currency };
    });
  }

  list(accountId: string): Promise<Ride[]> {
    return this.txHost.tx.getRepository(Ride).find({ where: { accountId }, order: { id: 'ASC' } });
  }
}
