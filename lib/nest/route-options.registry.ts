import { Inject, Injectable } from '@nestjs/common';
import {
  GRAPHQL_RESOLVER_TYPE_METADATA,
  IDEMPOTENCY_MODULE_OPTIONS,
  IDEMPOTENT_ROUTE_METADATA,
  NEST_EVENT_HANDLER,
  NEST_HOST_METADATA,
  NEST_PATTERN_HANDLER_METADATA,
  NEST_PATTERN_METADATA,
  NEST_ROUTE_ARGS_METADATA,
} from '../shared/idempotency.constants.js';
import { readIdempotencyKey } from './decorators/idempotency-key.decorator.js';
import type { IdempotentOptions } from '../shared/interfaces/idempotent-options.interface.js';
import type { ResolvedIdempotencyOptions, ResolvedRouteOptions } from '../shared/interfaces/resolved-options.interface.js';
import { resolveRouteOptions, type RouteKind } from '../shared/options/route-options.resolver.js';

/** What kind of handler carries the decorator, from the metadata Nest's packages put on it. */
function kindOf(handler: object): RouteKind {
  if (Reflect.getMetadata(NEST_PATTERN_METADATA, handler) !== undefined) return 'message';
  return Reflect.getMetadata(GRAPHQL_RESOLVER_TYPE_METADATA, handler) !== undefined ? 'graphql' : 'http';
}

/**
 * Whether `handler` (a method of `type` or of a class it extends) has an `@IdempotencyKey()`
 * parameter. Looked up by the function, not its name: a decorator that wraps the method renames it.
 */
function readsKey(type: object, handler: object): boolean {
  for (let p = (type as { prototype?: object }).prototype; p && p !== Object.prototype; p = Object.getPrototypeOf(p) as object) {
    for (const name of Object.getOwnPropertyNames(p)) {
      if (Object.getOwnPropertyDescriptor(p, name)?.value !== handler) continue;
      const args = (Reflect.getMetadata(NEST_ROUTE_ARGS_METADATA, type, name) ?? {}) as Record<string, { factory?: unknown }>;
      return Object.values(args).some((arg) => arg.factory === readIdempotencyKey);
    }
  }
  return false;
}

/**
 * The resolved options of each `@Idempotent()` handler: what the decorator put on it, merged with the
 * module options and checked, once per handler. The explorer resolves every route at bootstrap (so a
 * bad option fails the start); the interceptor then finds the result here.
 */
@Injectable()
export class RouteOptionsRegistry {
  private readonly routes = new WeakMap<object, ResolvedRouteOptions>();
  /** Some resolved route has `atomicPhases`: the store's recovery points must work (the health check asks). */
  usesRecoveryPoints = false;

  constructor(@Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions) {}

  /** Whether `handler` carries `@Idempotent()`. */
  isIdempotent(handler: object): boolean {
    return Reflect.hasMetadata(IDEMPOTENT_ROUTE_METADATA, handler);
  }

  /** The options of a decorated handler of `type`; `where` names it in a startup error. */
  resolve(type: { name: string }, handler: { name: string }, where = '@Idempotent()'): ResolvedRouteOptions {
    let resolved = this.routes.get(handler);
    if (!resolved) {
      const route = (Reflect.getMetadata(IDEMPOTENT_ROUTE_METADATA, handler) ?? {}) as IdempotentOptions;
      const event = Reflect.getMetadata(NEST_PATTERN_HANDLER_METADATA, handler) === NEST_EVENT_HANDLER;
      resolved = resolveRouteOptions(where, `${type.name}.${handler.name}`, route, this.options, kindOf(handler), event);
      if (Reflect.getMetadata(NEST_HOST_METADATA, type) !== undefined) resolved = { ...resolved, hostScoped: true };
      // Decided here, not per request: a WeakMap entry per request cost more garbage collection than the lookup.
      if (readsKey(type, handler)) resolved = { ...resolved, readsKey: true };
      if (resolved.settling === 'phases') this.usesRecoveryPoints = true;
      this.routes.set(handler, resolved);
    }
    return resolved;
  }
}
