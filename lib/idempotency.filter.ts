import { type ArgumentsHost, Catch, type ExceptionFilter } from '@nestjs/common';
import { throwError } from 'rxjs';
import { IdempotencyException } from './exceptions/idempotency.exception.js';
import { IdempotentReplay } from './exceptions/idempotent-replay.exception.js';

/**
 * Applied with `@Idempotent()`. On HTTP the interceptor has already sent the answer (a replay, or the
 * module's 4xx/503) before throwing it on, so there is nothing left to write; catching the two keeps
 * Nest's default handler from logging a replay as an unknown error. When an application filter
 * catches them first (a catch-all above `@Idempotent()`), what it writes is discarded.
 *
 * Outside HTTP the module's refusals leave as an `RpcException` or a GraphQL error, never these: one
 * that arrives here is the handler's own (an `IdempotencyInbox.run()` inside it, say), and must reach
 * the sender as the handler threw it rather than be swallowed.
 */
@Catch(IdempotencyException, IdempotentReplay)
export class IdempotencyExceptionFilter implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): unknown {
    // An RPC filter's value is the reply: undefined would answer nothing. (GraphQL rethrows by itself.)
    return host.getType() === 'rpc' ? throwError(() => exception) : undefined;
  }
}
