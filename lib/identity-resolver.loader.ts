import { Injectable, type Type } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
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
 * module provides it). Each class is instantiated once.
 */
@Injectable()
export class IdentityResolverLoader {
  private readonly resolvers = new Map<IdempotencyIdentity, Promise<IdentityFunction>>();

  constructor(private readonly moduleRef: ModuleRef) {}

  /** Instantiates a resolver class ahead of the first request, so a missing dependency fails at startup. */
  async prepare(identity: IdempotencyIdentity | undefined): Promise<void> {
    if (identity && isResolverClass(identity)) await this.load(identity);
  }

  /** The function that resolves `identity`'s scope; a promise only the first time a class is used. */
  load(identity: IdempotencyIdentity): IdentityFunction | Promise<IdentityFunction> {
    if (!isResolverClass(identity)) return identity;
    let resolver = this.resolvers.get(identity);
    if (!resolver) {
      resolver = instanceFromContainer(this.moduleRef, identity).then((instance) => instance.resolve.bind(instance));
      this.resolvers.set(identity, resolver);
    }
    return resolver;
  }
}
