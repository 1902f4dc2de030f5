import { Body, Controller, Get, Inject, Post, Req, UseGuards } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { Idempotent, IdempotencyKey } from '../lib/index.js';
import { AuthGuard, type Caller } from './auth.guard.js';
import { DatabaseService } from './database.service.js';
import { parsePayment } from './validation.js';

/** Simulated latency of the payment provider call, in ms. */
export const PROVIDER_LATENCY_MS = Symbol('PROVIDER_LATENCY_MS');

@Controller('payments')
@UseGuards(AuthGuard)
export class PaymentsController {
  constructor(
    private readonly db: DatabaseService,
    @Inject(PROVIDER_LATENCY_MS) private readonly providerLatencyMs: number,
  ) {}

  /** Charges once per Idempotency-Key and account; retries get the stored response. */
  @Post()
  @Idempotent()
  async create(@Body() body: unknown, @Req() req: { user: Caller }, @IdempotencyKey() key: string) {
    const { amount, currency } = parsePayment(body);
    // A real handler passes `key` on to its payment provider, which deduplicates too.
    if (this.providerLatencyMs > 0) await sleep(this.providerLatencyMs);
    const row = this.db.addPayment(req.user.accountId, amount, currency, key);
    return { id: `pay_${row.id}`, amount: row.amount, currency: row.currency, status: 'succeeded', createdAt: row.created_at };
  }

  @Get()
  list(@Req() req: { user: Caller }) {
    return this.db.payments(req.user.accountId).map((r) => ({ id: `pay_${r.id}`, amount: r.amount, currency: r.currency }));
  }
}
