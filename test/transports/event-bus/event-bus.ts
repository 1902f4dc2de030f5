import { Injectable, type OnApplicationBootstrap, SetMetadata } from '@nestjs/common';
import { DiscoveryService, ExternalContextCreator, MetadataScanner } from '@nestjs/core';

/** One event on the bus: an id its publisher chose (a retry publishes the same id again), a type, a payload. */
export interface BusEvent {
  readonly id: string;
  readonly type: string;
  readonly data: unknown;
}

export const ON_BUS_EVENT = 'test:on-bus-event';

/** Subscribes a provider's method to the events of one type. */
export const OnBusEvent = (type: string) => SetMetadata(ON_BUS_EVENT, type);

/**
 * An in-process event bus, as a library an application might bring: `publish()` hands the event to
 * every subscribed method through Nest's enhancers (guards, interceptors, filters) under an execution
 * context of its own type, `'bus'`. It knows nothing of idempotency.
 */
@Injectable()
export class EventBus implements OnApplicationBootstrap {
  private readonly handlers = new Map<string, ((event: BusEvent) => Promise<unknown>)[]>();

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly contexts: ExternalContextCreator,
  ) {}

  onApplicationBootstrap(): void {
    for (const { instance } of this.discovery.getProviders()) {
      if (!instance || typeof instance !== 'object') continue;
      const prototype = Object.getPrototypeOf(instance) as Record<string, (...args: unknown[]) => unknown>;
      for (const name of this.scanner.getAllMethodNames(prototype)) {
        const type = Reflect.getMetadata(ON_BUS_EVENT, prototype[name]) as string | undefined;
        if (type === undefined) continue;
        const options = { guards: true, interceptors: true, filters: true };
        const handler = this.contexts.create(
          instance,
          prototype[name],
          name,
          undefined,
          undefined,
          undefined,
          undefined,
          options,
          'bus',
        );
        this.handlers.set(type, [...(this.handlers.get(type) ?? []), handler]);
      }
    }
  }

  /** What each subscriber of the event's type answered, in subscription order; a subscriber's error rejects. */
  publish(event: BusEvent): Promise<unknown[]> {
    return Promise.all((this.handlers.get(event.type) ?? []).map((handler) => handler(event)));
  }
}
