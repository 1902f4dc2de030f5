import { Body, Controller, Get, Post, Req, UseGuards, UnprocessableEntityException } from '@nestjs/common';
import { Idempotent, PhasedRun, Phases } from '../../lib/index.js';
import { AuthGuard, type Caller } from '../auth.guard.js';
import { parsePayment } from '../validation.js';
import { type BookRide, RidesService } from './rides.service.js';

/** A place name: 1 to 100 characters. */
function place(value: unknown, name: string): string {
  if (typeof value !== 'string' || value.length < 1 || value.length > 100) {
    throw new UnprocessableEntityException({ error: `${name} must be a string of 1 to 100 characters` });
  }
  return value;
}

function parseRide(body: unknown): BookRide {
  const payment = parsePayment(body);
  const b = body as Record<string, unknown>;
  return { origin: place(b.origin, 'origin'), destination: place(b.destination, 'destination'), ...payment };
}

/** Rides in atomic phases: a retry after a crash resumes where the run stopped, never charging twice. */
@Controller('ledger/rides')
@UseGuards(AuthGuard)
export class RidesController {
  constructor(private readonly rides: RidesService) {}

  @Post()
  @Idempotent({ atomicPhases: true })
  book(@Body() body: unknown, @Req() req: { user: Caller }, @Phases() run: PhasedRun): Promise<object> {
    return this.rides.book(run, { accountId: req.user.accountId, ...parseRide(body) });
  }

  @Get()
  async list(@Req() req: { user: Caller }): Promise<object[]> {
    return (await this.rides.list(req.user.accountId)).map((r) => ({
      id: `ride_${r.id}`,
      chargeId: r.chargeId,
      receiptQueued: r.receiptQueued,
    }));
  }
}
