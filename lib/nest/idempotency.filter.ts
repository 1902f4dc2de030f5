import { type ArgumentsHost, Catch, type ExceptionFilter, Inject, Optional } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { throwError } from 'rxjs';
import { IdempotencyException } from '../shared/exceptions/idempotency.exception.js';
import { IdempotentReplay } from '../shared/exceptions/idempotent-replay.exception.js';
import { writeAnswer } from '../transports/http/answer.writer.js';
import { isFastifyReply } from '../shared/http/response.adapter.js';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../shared/idempotency.constants.js';
import { CONFIG_ERRORS } from '../shared/messages/config.messages.js';
import type { ResolvedIdempotencyOptions } from '../shared/interfaces/resolved-options.interface.js';

/**
 * Applied with `@Idempotent()`. On HTTP the interceptor has mostly sent the answer (a replay, or the
 * module's 4xx/503) before throwing it on, and the response is locked; one nothing has written yet
 * (an `IdempotencyException` the handler threw itself, a phased run's `phases-changed`) is written
 * here, so no request is left without an answer. Catching the two keeps Nest's default handler from
 * logging a replay as an unknown error. When an application filter catches them first (a catch-all
 * above `@Idempotent()`), what it writes after the module's answer is discarded.
 *
 * Outside HTTP the module's refusals leave as an `RpcException` or a GraphQL error, never these: one
 * that arrives here is the handler's own (an `IdempotencyInbox.run()` inside it, say), and must reach
 * the sender as the handler threw it rather than be swallowed. On a transport of the application's
 * own (another context type) it is thrown on to that transport's caller.
 */
@Catch(IdempotencyException, IdempotentReplay)
export class IdempotencyExceptionFilter implements ExceptionFilter {
  // Optional so that a missing IdempotencyModule is named: Nest's own error lists injection tokens.
  constructor(@Optional() @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions) {
    if (!options) throw new Error(CONFIG_ERRORS.moduleMissing);
  }

  catch(exception: unknown, host: ArgumentsHost): unknown {
    // An RPC filter's value is the reply: undefined would answer nothing. (GraphQL rethrows by itself.)
    if (host.getType() === 'rpc') return throwError(() => exception);
    if (host.getType() === 'http') {
      const response = host.switchToHttp().getResponse<object>();
      const raw = isFastifyReply(response) ? response.raw : (response as ServerResponse);
      if (!raw.headersSent) writeAnswer(response, exception, this.options);
      return undefined;
    }
    if (host.getType<string>() === 'graphql') return undefined;
    // A transport of an application's own: its caller gets the refusal, as the handler's own error.
    throw exception;
  }
}
