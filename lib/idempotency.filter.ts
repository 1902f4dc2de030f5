import { Catch, type ExceptionFilter } from '@nestjs/common';
import { IdempotencyException } from './exceptions/idempotency.exception.js';
import { IdempotentReplay } from './exceptions/idempotent-replay.exception.js';

/**
 * Applied with `@Idempotent()`. The interceptor has already sent the answer (a replay, or the
 * module's 4xx/503) before throwing it on, so there is nothing left to write; catching the two keeps
 * Nest's default handler from logging a replay as an unknown error. When an application filter
 * catches them first (a catch-all above `@Idempotent()`), what it writes is discarded.
 */
@Catch(IdempotencyException, IdempotentReplay)
export class IdempotencyExceptionFilter implements ExceptionFilter {
  catch(): void {
    // The response is already sent.
  }
}
