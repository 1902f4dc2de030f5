import { Injectable, Scope, type Type } from '@nestjs/common';
import { ContextIdFactory, ModuleRef } from '@nestjs/core';
import { CONFIG_ERRORS } from './idempotency.messages.js';
import { instanceFromContainer } from './utils/container.util.js';
import type {
  IdempotencyIdentity,
  IdempotencyIdentityResolver,
  IdentityFunction,
} from './interfaces/identity-resolver.interface.js';

type ResolverClass = Type<IdempotencyIdentityResolver>;

function isResolverClass(identity: IdempotencyIdentity): identity is ResolverClass {
  return typeof (identity.prototype as Partial<IdempotencyIdentityResolver> | undefined)?.resolve === 'function';
}

/**
 * Turns an `identity` option into a function: a function as it is, a resolver class as its
 * instance from the application's container (or built with the container's dependencies when no
 * module provides it). Each class is instantiated once; a REQUEST-scoped provider (or one that
 * depends on one) is resolved for each request, in that request's DI context, so it sees what the
 * request's own providers see.
 */
@Injectable()
export class IdentityResolverLoader {
  private readonly resolvers = new Map<IdempotencyIdentity, Promise<IdentityFunction>>();

  constructor(private readonly moduleRef: ModuleRef) {}

  /**
   * Instantiates a resolver class ahead of the first request, so a missing dependency fails at
   * startup with a sentence naming the route and the option, not Nest's DI text.
   */
  async prepare(identity: IdempotencyIdentity | undefined, where = '@Idempotent()'): Promise<void> {
    if (!identity || !isResolverClass(identity)) return;
    try {
      await this.load(identity);
    } catch (err) {
      this.resolvers.delete(identity);
      throw new Error(`${where}: ${CONFIG_ERRORS.identityUnbuildable(identity.name, (err as Error).message)}`, { cause: err });
    }
  }

  /** The function that resolves `identity`'s scope; a promise only the first time a class is used. */
  load(identity: IdempotencyIdentity): IdentityFunction | Promise<IdentityFunction> {
    if (!isResolverClass(identity)) return identity;
    let resolver = this.resolvers.get(identity);
    if (!resolver) {
      resolver = this.requestScoped(identity)
        ? Promise.resolve(this.perRequest(identity))
        : instanceFromContainer(this.moduleRef, identity).then((instance) => instance.resolve.bind(instance));
      this.resolvers.set(identity, resolver);
    }
    return resolver;
  }

  /** Whether the container holds the class as a provider that lives per request (its own scope, or a dependency's). */
  private requestScoped(type: ResolverClass): boolean {
    try {
      return this.moduleRef.introspect(type).scope === Scope.REQUEST;
    } catch {
      return false; // not a provider of any module: built once with the container's dependencies
    }
  }

  private perRequest(type: ResolverClass): IdentityFunction {
    return async (request, context) => {
      const contextId = ContextIdFactory.getByRequest(request as object);
      this.moduleRef.registerRequestByContextId(request, contextId);
      const instance = await this.moduleRef.resolve(type, contextId, { strict: false });
      return instance.resolve(request, context);
    };
  }
}
