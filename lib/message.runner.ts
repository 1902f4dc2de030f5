import { type CallHandler, type ExecutionContext, Injectable } from '@nestjs/common';
import { lastValueFrom, type Observable, of } from 'rxjs';
import { IDEMPOTENCY_ERRORS } from './exceptions/idempotency-errors.table.js';
import { IdempotencyException } from './exceptions/idempotency.exception.js';
import { MESSAGES } from './idempotency.messages.js';
import { InboxContext } from './inbox/inbox.context.js';
import { InboxRunner } from './inbox.runner.js';
import type { ResolvedRouteOptions } from './interfaces/resolved-options.interface.js';

/** Where a message carries its key unless the handler's `keyFrom` says otherwise. */
const KEY_FIELD = 'idempotencyKey';

type RpcExceptionType = new (error: object) => Error;
let rpcException: Promise<RpcExceptionType> | undefined;

/** Loaded on the first refused message: an application without @nestjs/microservices never gets here. */
async function rpcError(err: IdempotencyException): Promise<Error> {
  rpcException ??= import('@nestjs/microservices').then((m) => m.RpcException as RpcExceptionType);
  const code = `IDEMPOTENCY_${err.code!.toUpperCase().replace(/-/g, '_')}`;
  // retryable: what Retry-After says on HTTP; the same message may be sent again later.
  const { retryAfter: retryable } = IDEMPOTENCY_ERRORS[err.code!];
  return new (await rpcException)({ code, status: err.getStatus(), retryable, message: err.reason });
}

function defaultKey(data: unknown): unknown {
  return data !== null && typeof data === 'object' ? (data as Record<string, unknown>)[KEY_FIELD] : undefined;
}

/**
 * Runs an `@Idempotent()` message handler (`@MessagePattern()`, `@EventPattern()`) once per message
 * key, as `IdempotencyInbox.run()` runs work: the handler's last value is its stored reply, a
 * duplicate gets that reply without running it, and the module's refusals reach the sender as an
 * `RpcException` whose error is `{ code, status, retryable, message }` (`IDEMPOTENCY_KEY_IN_FLIGHT`, …).
 */
@Injectable()
export class MessageRunner {
  constructor(private readonly inbox: InboxRunner) {}

  async handle(context: ExecutionContext, next: CallHandler, route: ResolvedRouteOptions): Promise<Observable<unknown>> {
    const data: unknown = context.switchToRpc().getData();
    const { keyFrom } = route.message!;
    const key: unknown = keyFrom ? keyFrom(data, context) : defaultKey(data);
    try {
      if (typeof key !== 'string' || key === '') {
        if (route.missingHeader === 'pass-through') return next.handle();
        throw IdempotencyException.of('key-missing', MESSAGES.messageKey);
      }
      const work = (): Promise<unknown> => lastValueFrom(next.handle(), { defaultValue: undefined });
      const done = await this.inbox.run(route, new InboxContext(key, { consumer: route.id, payload: data }), work);
      return of(done.value);
    } catch (err) {
      throw err instanceof IdempotencyException && err.code ? await rpcError(err) : err;
    }
  }
}
