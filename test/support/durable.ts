import { Body, Controller, Get, Post } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { Idempotent } from '../../lib/index.js';
import { Gate, Runs } from './fixtures.js';

/** A JSON response of about `mb` megabytes. */
export function bigBody(mb: number): { items: string[] } {
  return { items: Array.from({ length: mb * 16 }, (_, i) => `${i}:`.padEnd(65_536, 'x')) };
}

export const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/** Routes for the production-day tests of the durable stores. */
@Controller('durable')
export class DurableController {
  constructor(
    private readonly runs: Runs,
    private readonly gate: Gate,
  ) {}

  @Post('big')
  @Idempotent()
  big(@Body() body: { mb: number }) {
    this.runs.hit('big');
    return bigBody(body.mb);
  }

  @Post('held')
  @Idempotent()
  async held() {
    const run = this.runs.hit('held');
    await this.gate.pass();
    return { run };
  }

  /** Not idempotent: answers while the store is busy, to show the event loop is free. */
  @Get('ping')
  ping() {
    return { ok: true };
  }
}
