import { Transactional, TransactionHost } from '@nestjs-cls/transactional';
import type { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Inject, Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CreatePayment } from '../validation.js';
import { Charge } from './charge.entity.js';
import { LEDGER_OPTIONS, type LedgerOptions } from './ledger.options.js';

/** Writes charges through `txHost.tx`, as any `@nestjs-cls/transactional` service does. */
@Injectable()
export class ChargesService {
  constructor(
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    @Inject(LEDGER_OPTIONS) private readonly options: LedgerOptions,
  ) {}

  /**
   * Joins the request's transaction on a transactional route (the idempotency record commits with
   * the charge), or commits on its own when it returns on a plain one.
   */
  @Transactional()
  async create(accountId: string, payment: CreatePayment, key: string): Promise<Charge> {
    const charge = await this.txHost.tx.getRepository(Charge).save({ accountId, idempotencyKey: key, ...payment });
    if (this.options.latencyMs > 0) await sleep(this.options.latencyMs);
    return charge;
  }

  list(accountId: string): Promise<Charge[]> {
    return this.txHost.tx.getRepository(Charge).find({ where: { accountId }, order: { id: 'ASC' } });
  }
}
