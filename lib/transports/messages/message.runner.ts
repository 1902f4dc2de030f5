import { type CallHandler, type ExecutionContext, Inject, Injectable, Logger } from '@nestjs/common';
import { lastValueFrom, type Observable, of } from 'rxjs';
import { errorExtensions } from '../../shared/exceptions/error-extensions.js';
import { IdempotencyException } from '../../shared/exceptions/idempotency.exception.js';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../../shared/idempotency.constants.js';
import { MESSAGES } from '../../shared/messages/client.messages.js';
import { LOGS } from '../../shared/messages/operator.messages.js';
import { InboxContext } from '../../core/values/inbox.context.js';
import { InboxRunner } from '../../core/inbox.runner.js';
import type { IdempotencyTransport } from '../../core/idempotency-transport.interface.js';
import type { ResolvedIdempotencyOptions, ResolvedRouteOptions } from '../../shared/interfaces/resolved-options.interface.js';
import { type Delivery, MessageAcknowledger } from './message.acknowledger.js';
import { readMessageKey, readMessageScope } from './message-key.reader.js';
import { importRequired } from '../../shared/utils/optional-peer.util.js';

/** The HTTP sentences name the header; a message's sender reads these instead. */
const MESSAGE_REASONS: Partial<Record<string, string>> = {
  'key-in-flight': MESSAGES.messageInFlight,
  'key-reused': MESSAGES.messageReused,
};

type RpcExceptionType = new (error: object) => Error;
let rpcException: Promise<RpcExceptionType> | undefined;

/** Loaded on the first refused message: an application without @nestjs/microservices never gets here. */
async function rpcError(err: IdempotencyException): Promise<Error> {
  rpcException ??= importRequired(
    '@Idempotent() on a message handler',
    '@nestjs/microservices',
    12,
    () => import('@nestjs/microservices'),
  ).then((m) => m.RpcException as RpcExceptionType);
  const message = MESSAGE_REASONS[err.code!] ?? err.reason;
  return new (await rpcException)({ ...errorExtensions(err), message });
}

/** An error's first line: a log line names what failed, not a stack or a multi-line dump. */
const firstLine = (err: unknown): string => (err instanceof Error ? err.message : String(err)).split('\n')[0].slice(0, 200);

type RpcContextShape = { getChannel?: unknown; getSubject?: unknown; getHeaders?: unknown; getChannelRef?: unknown };

/**
 * Whether the message came on a transport that may hand one request to every replica: Nest's Redis
 * transport always does, NATS does without a queue group. Read by shape, loading no transport package.
 */
function broadcast(context: ExecutionContext): boolean {
  const rpc = context.switchToRpc().getContext<RpcContextShape | undefined>();
  if (typeof rpc?.getChannel === 'function' && typeof rpc.getChannelRef !== 'function') return true;
  return typeof rpc?.getSubject === 'function' && typeof rpc.getHeaders === 'function';
}

/** What was read of a message before its claim: a failure there is the message's, not a run's. */
interface Read {
  key: string | undefined;
  scope: string | undefined;
}

/**
 * Runs an `@Idempotent()` message handler (`@MessagePattern()`, `@EventPattern()`) once per message
 * key, as `IdempotencyInbox.run()` runs work, in the handler's own records (its `Class.method`, under
 * its `scope`): the handler's last value is its stored reply, a duplicate gets that reply without
 * running it, and the module's refusals reach the sender as an `RpcException` whose error is
 * `{ code, status, retryable, message }` (`IDEMPOTENCY_KEY_IN_FLIGHT`, …).
 */
@Injectable()
export class MessageRunner implements IdempotencyTransport {
  readonly contextType = 'rpc';
  private readonly logger = new Logger('Idempotency');
  /** Each handler's options with the wait of a broadcast transport's duplicates, made once. */
  private readonly waiting = new WeakMap<ResolvedRouteOptions, ResolvedRouteOptions>();

  constructor(
    private readonly inbox: InboxRunner,
    private readonly acks: MessageAcknowledger,
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  async handle(context: ExecutionContext, next: CallHandler, route: ResolvedRouteOptions): Promise<Observable<unknown>> {
    const { ack, event } = route.message!;
    const delivery = ack ? this.acks.delivery(context, route) : undefined;
    const read = await this.read(context, route, delivery);
    // Rejected and logged once: an event has no sender to tell, so Nest need not log it again.
    if (!read) return of(undefined);
    // With ack: 'skipped' the handler settles the delivery it runs; the module those it does not run.
    let ran = false;
    const work = (): Promise<unknown> => {
      ran = true;
      return lastValueFrom(next.handle(), { defaultValue: undefined });
    };
    const settles = () => !(ran && ack === 'skipped');
    try {
      let value: unknown;
      if (read.key !== undefined) {
        const call = new InboxContext(
          read.key,
          { consumer: route.id, payload: context.switchToRpc().getData(), scope: read.scope },
          'message',
        );
        // An event has no reply: its value is not kept, so none can fail to be stored or be replayed.
        const run = event ? () => work().then(() => undefined) : work;
        const waits = !delivery && broadcast(context);
        value = (await this.inbox.run(waits ? this.waitingRoute(route) : route, call, run)).value;
      } else if (route.missingHeader === 'pass-through') {
        // Unacknowledged deliveries wait for the handler here too; without ack, the handler's own stream is returned as it is.
        if (!delivery) return next.handle();
        value = await work();
      } else {
        throw IdempotencyException.of('key-missing', MESSAGES.messageKey);
      }
      if (settles()) delivery?.done(read.key);
      return of(value);
    } catch (err) {
      if (settles()) delivery?.failed(err, read.key);
      throw await this.refusal(err);
    }
  }

  /**
   * The message's key and scope. What throws here (the application's `keyFrom` or `scope`, a scope
   * refused) ran nothing and cannot succeed on another delivery: the delivery is rejected, not left
   * unacknowledged to fill the consumer's prefetch window. `undefined`: an event's delivery so settled.
   */
  private async read(
    context: ExecutionContext,
    route: ResolvedRouteOptions,
    delivery: Delivery | undefined,
  ): Promise<Read | undefined> {
    const { keyFrom, scope, event } = route.message!;
    try {
      const key = readMessageKey(context, keyFrom);
      return { key, scope: key === undefined ? undefined : await readMessageScope(context, scope, this.options.maxScopeLength) };
    } catch (err) {
      const why = LOGS.unreadableMessage(err instanceof IdempotencyException && err.code ? err.code : firstLine(err));
      if (!delivery) this.logger.error(LOGS.messageRefused(route.id, why));
      else delivery.unreadable(why);
      if (delivery && event) return undefined;
      throw await this.refusal(err);
    }
  }

  /**
   * A replica that got a broadcast copy of a request another replica runs must not answer first with
   * a refusal: the sender takes the first reply. It waits for the run's settle and answers its replay,
   * which comes after the run's own reply (and is dropped by the sender), or runs the handler itself
   * when the run failed or its owner died.
   */
  private waitingRoute(route: ResolvedRouteOptions): ResolvedRouteOptions {
    let waiting = this.waiting.get(route);
    if (!waiting) this.waiting.set(route, (waiting = { ...route, waitMs: route.message!.broadcastWaitMs }));
    return waiting;
  }

  private async refusal(err: unknown): Promise<unknown> {
    return err instanceof IdempotencyException && err.code ? await rpcError(err) : err;
  }
}
