import { Body, Controller, Post, Req, UseGuards } from '@nestjs/common';
import { Idempotent, IdempotencyKey } from '../../lib/index.js';
import { AuthGuard, type Caller } from '../auth.guard.js';
import { ChargesController } from './charges.controller.js';
import { ChargesService } from './charges.service.js';
import { Faults } from './faults.js';

/**
 * The contrast: the same route on a cache-style store. The charge commits in its own transaction
 * when the service returns, the idempotency record only after the response: a crash between the two
 * leaves a charge without a record, and the retry charges again.
 */
@Controller('ledger/charges')
@UseGuards(AuthGuard)
export class CachedChargesController extends ChargesController {
  constructor(
    charges: ChargesService,
    private readonly faults: Faults,
  ) {
    super(charges);
  }

  @Post()
  @Idempotent()
  override async create(@Body() body: unknown, @Req() req: { user: Caller }, @IdempotencyKey() key: string): Promise<object> {
    const charge = await super.create(body, req, key);
    this.faults.afterCommit();
    return charge;
  }
}
