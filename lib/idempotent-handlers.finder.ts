import type { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { RouteOptionsAccessor } from './route-options.accessor.js';

/** A controller method that carries `@Idempotent()`. */
export interface IdempotentHandler {
  /** The controller class. */
  readonly type: { readonly name: string; readonly prototype: object };
  /** The method's name. */
  readonly name: string;
  /** The method, which carries the metadata. */
  readonly handler: (...args: never[]) => unknown;
  /** `@Idempotent() on Controller.method()`, for startup errors. */
  readonly where: string;
}

/** Every `@Idempotent()` method of the application's controllers (inherited ones too). */
export function findIdempotentHandlers(
  discovery: DiscoveryService,
  scanner: MetadataScanner,
  routes: RouteOptionsAccessor,
): IdempotentHandler[] {
  const found: IdempotentHandler[] = [];
  for (const wrapper of discovery.getControllers()) {
    const type = wrapper.metatype as { name: string; prototype?: object } | undefined;
    if (!type?.prototype) continue;
    const prototype = type.prototype as Record<string, unknown>;
    for (const name of scanner.getAllMethodNames(prototype)) {
      const handler = prototype[name];
      if (typeof handler !== 'function' || !routes.isIdempotent(handler)) continue;
      found.push({
        type: type as IdempotentHandler['type'],
        name,
        handler: handler as IdempotentHandler['handler'],
        where: `@Idempotent() on ${type.name}.${name}()`,
      });
    }
  }
  return found;
}
