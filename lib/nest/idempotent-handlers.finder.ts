import type { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { IDEMPOTENCY_MODULE_OPTIONS, NEST_ROUTE_ARGS_METADATA } from '../shared/idempotency.constants.js';
import { readIdempotencyKey } from './decorators/idempotency-key.decorator.js';
import type { RouteOptionsRegistry } from './route-options.registry.js';

/** The parts of Nest's `Module` (an `InstanceWrapper`'s host) the lookup reads. */
export interface HostModule {
  readonly id: string;
  readonly metatype: unknown;
  readonly providers: ReadonlyMap<unknown, unknown>;
  readonly exports: ReadonlySet<unknown>;
  readonly imports: ReadonlySet<HostModule | undefined>;
}

/**
 * The module whose registration a controller of `host` gets its idempotency providers from, found
 * as Nest's injector finds a dependency: the host's own providers, else its imports in order, depth
 * first, through modules that re-export; the first module that provides and exports the token wins.
 * A feature module's own `forRoot()` import comes before the global registrations Nest adds after it.
 */
export function registrationOf(host: HostModule, seen = new Set<string>(), traversing = false): HostModule | undefined {
  if (!traversing && host.providers.has(IDEMPOTENCY_MODULE_OPTIONS)) return host;
  for (const related of host.imports) {
    if (!related || seen.has(related.id)) continue;
    if (traversing && !host.exports.has(related.metatype)) continue;
    seen.add(related.id);
    if (related.exports.has(IDEMPOTENCY_MODULE_OPTIONS) && related.providers.has(IDEMPOTENCY_MODULE_OPTIONS)) return related;
    const deeper = registrationOf(related, seen, true);
    if (deeper) return deeper;
  }
  return undefined;
}

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

/** Whether a controller of `host` is served by the registration whose resolved options are `options`. */
export function servedBy(options: object): (host: HostModule | undefined) => boolean {
  return (host) => {
    const registration = host && registrationOf(host);
    if (!registration) return true;
    return (registration.providers.get(IDEMPOTENCY_MODULE_OPTIONS) as { instance?: unknown }).instance === options;
  };
}

/** Each method of the controllers `serves` accepts, inherited ones too, with its class and name. */
function* controllerMethods(
  discovery: DiscoveryService,
  scanner: MetadataScanner,
  serves: (host: HostModule | undefined) => boolean,
): Generator<{ type: IdempotentHandler['type']; name: string; handler: (...args: never[]) => unknown }> {
  for (const wrapper of discovery.getControllers()) {
    const type = wrapper.metatype as { name: string; prototype?: object } | undefined;
    if (!type?.prototype || !serves(wrapper.host)) continue;
    const prototype = type.prototype as Record<string, unknown>;
    for (const name of scanner.getAllMethodNames(prototype)) {
      const handler = prototype[name];
      if (typeof handler === 'function')
        yield { type: type as IdempotentHandler['type'], name, handler: handler as IdempotentHandler['handler'] };
    }
  }
}

/**
 * Every `@Idempotent()` method of the application's controllers (inherited ones too) that `serves`
 * accepts: with several registrations, each explores the controllers it serves (see
 * {@link registrationOf}).
 */
export function findIdempotentHandlers(
  discovery: DiscoveryService,
  scanner: MetadataScanner,
  routes: RouteOptionsRegistry,
  serves: (host: HostModule | undefined) => boolean,
): IdempotentHandler[] {
  const found: IdempotentHandler[] = [];
  for (const { type, name, handler } of controllerMethods(discovery, scanner, serves)) {
    if (routes.isIdempotent(handler)) found.push({ type, name, handler, where: `@Idempotent() on ${type.name}.${name}()` });
  }
  return found;
}

/**
 * The controller methods that `serves` accepts with an `@IdempotencyKey()` parameter but no
 * `@Idempotent()`, as `Controller.method()`: the key is only read on idempotent routes, so there it
 * would be `undefined` and nothing deduplicated.
 */
export function findStrayKeyReaders(
  discovery: DiscoveryService,
  scanner: MetadataScanner,
  routes: RouteOptionsRegistry,
  serves: (host: HostModule | undefined) => boolean,
): string[] {
  const found: string[] = [];
  for (const { type, name, handler } of controllerMethods(discovery, scanner, serves)) {
    if (routes.isIdempotent(handler)) continue;
    const args = (Reflect.getMetadata(NEST_ROUTE_ARGS_METADATA, type, name) ?? {}) as Record<string, { factory?: unknown }>;
    if (Object.values(args).some((arg) => arg.factory === readIdempotencyKey)) found.push(`${type.name}.${name}()`);
  }
  return found;
}
