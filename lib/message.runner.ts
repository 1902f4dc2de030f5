import { type CallHandler, type ExecutionContext, Injectable } from '@nestjs/common';
import { lastValueFrom, type Observable, of } from 'rxjs';
import { errorExtensions } from './exceptions/error-extensions.js';
import { IdempotencyException } from './exceptions/idempotency.exception.js';
import { MESSAGES } from './idempotency.messages.js';
import { InboxContext } from './inbox/inbox.context.js';
import { InboxRunner } from './inbox.runner.js';
import type { ResolvedRouteOptions } from './interfaces/resolved-options.interface.js';
import { MessageAcknowledger } from './message.acknowledger.js';
import { readMessageKey } from './message-key.reader.js';

/** The HTTP sentences name the header; a message's sender reads these instead. */
const MESSAGE_REASONS: Partial<Record<string, string>> = {
  'key-in-flight': MESSAGES.messageInFlight,
  'key-reused': MESSAGES.messageReused,
};

type RpcExceptionType = new (error: object) => Error;
let rpcException: Promise<RpcExceptionType> | undefined;

/** Loaded on the first refused message: an application without @nestjs/microservices never gets here. */
async function rpcError(err: IdempotencyException): Promise<Error> {
  rpcException ??= import('@nestjs/microservices').then((m) => m.RpcException as RpcExceptionType);
  const message = MESSAGE_REASONS[err.code!] ?? err.reason;
  return new (await rpcException)({ ...errorExtensions(err), message });
}

/**
 * Runs an `@Idempotent()` message handler (`@MessagePattern()`, `@EventPattern()`) once per message
 * key, as `IdempotencyInbox.run()` runs work: the handler's last value is its stored reply, a
 * duplicate gets that reply without running it, and the module's refusals reach the sender as an
 * `RpcException` whose error is `{ code, status, retryable, message }` (`IDEMPOTENCY_KEY_IN_FLIGHT`, …).
 */
@Injectable()
export class MessageRunner {
  constructor(
    private readonly inbox: InboxRunner,
    private readonly acks: MessageAcknowledger,
  ) {}

  async handle(context: ExecutionContext, next: CallHandler, route: ResolvedRouteOptions): Promise<Observable<unknown>> {
    const { keyFrom, ack } = route.message!;
    const key = readMessageKey(context, keyFrom);
    const delivery = ack ? this.acks.delivery(context, route, key) : undefined;
    const work = (): Promise<unknown> => lastValueFrom(next.handle(), { defaultValue: undefined });
    try {
      let value: unknown;
      if (key !== undefined) {
        const payload: unknown = context.switchToRpc().getData();
        value = (await this.inbox.run(route, new InboxContext(key, { consumer: route.id, payload }), work)).value;
      } else if (route.missingHeader === 'pass-through') {
        // Unacknowledged deliveries wait for the handler here too; without ack, the handler's own stream is returned as it is.
        if (!delivery) return next.handle();
        value = await work();
      } else {
        throw IdempotencyException.of('key-missing', MESSAGES.messageKey);
      }
      delivery?.done();
      return of(value);
    } catch (err) {
      delivery?.failed(err);
      throw err instanceof IdempotencyException && err.code ? await rpcError(err) : err;
    }
  }
}
