import type { CallHandler, ExecutionContext } from '@nestjs/common';
import { lastValueFrom, type Observable, of } from 'rxjs';
import { IdempotencyInbox } from '../../../lib/index.js';
import type { IdempotencyTransport } from '../../../lib/core/idempotency-transport.interface.js';
import type { ResolvedRouteOptions } from '../../../lib/shared/interfaces/resolved-options.interface.js';
import { type BusEvent, ON_BUS_EVENT } from './event-bus.js';

/**
 * `@Idempotent()` on the event bus: what a new transport costs. It reads the key (the event's id), the
 * consumer (the handler) and the content from its own context, and leaves the claim, the run and the
 * settle to the core through the public inbox. No claim, settle or store call here.
 */
export class BusTransport implements IdempotencyTransport {
  readonly contextType = 'bus';

  constructor(private readonly inbox: IdempotencyInbox) {}

  async handle(context: ExecutionContext, next: CallHandler, route: ResolvedRouteOptions): Promise<Observable<unknown>> {
    const [event] = context.getArgs<[BusEvent]>();
    const consumer = `${context.getClass().name}.${context.getHandler().name}`;
    const options = { consumer, payload: event.data, ttlMs: route.ttlMs };
    const { value } = await this.inbox.run(event.id, options, () => lastValueFrom(next.handle()));
    return of(value);
  }

  /** Its handlers are provider methods subscribed with `@OnBusEvent()`. */
  handlesProviderMethod(handler: (...args: never[]) => unknown): boolean {
    return Reflect.getMetadata(ON_BUS_EVENT, handler) !== undefined;
  }
}
