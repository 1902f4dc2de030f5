import { Body, Controller, Get, Post, Req, UseGuards } from '@nestjs/common';
import { Idempotent, IdempotencyKey } from '../../lib/index.js';
import { AuthGuard, type Caller } from '../auth.guard.js';
import { parsePayment } from '../validation.js';
import type { Charge } from './charge.entity.js';
import { ChargesService } from './charges.service.js';

const present = (c: Charge) => ({ id: `ch_${c.id}`, amount: c.amount, currency: c.currency, createdAt: c.createdAt });

/** Charges exactly once per key and account: the charge and its idempotency record commit together. */
@Controller('ledger/charges')
@UseGuards(AuthGuard)
export class ChargesController {
  constructor(protected readonly charges: ChargesService) {}

  @Post()
  @Idempotent({ transactional: true })
  async create(@Body() body: unknown, @Req() req: { user: Caller }, @IdempotencyKey() key: string): Promise<object> {
    return present(await this.charges.create(req.user.accountId, parsePayment(body), key));
  }

  @Get()
  async list(@Req() req: { user: Caller }): Promise<object[]> {
    return (await this.charges.list(req.user.accountId)).map(present);
  }
}
