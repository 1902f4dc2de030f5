import { type ExecutionContext, Inject, Injectable, Logger, Scope, type Type } from '@nestjs/common';
import { ContextIdFactory, ModuleRef } from '@nestjs/core';
import { IdempotencyException } from '../shared/exceptions/idempotency.exception.js';
import { type HttpRequestLike, requestHost } from '../shared/http/http-request.js';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../shared/idempotency.constants.js';
import { MESSAGES } from '../shared/messages/client.messages.js';
import { CONFIG_ERRORS } from '../shared/messages/config.messages.js';
import { LOGS } from '../shared/messages/operator.messages.js';
import { instanceFromContainer } from '../shared/utils/container.util.js';
import { escapeScope, keyViolation, UNSCOPED } from '../shared/utils/key.util.js';
import type {
  IdempotencyIdentity,
  IdempotencyIdentityResolver,
  IdentityFunction,
} from '../shared/interfaces/identity-resolver.interface.js';
import type { ResolvedIdempotencyOptions, ResolvedRouteOptions } from '../shared/interfaces/resolved-options.interface.js';

type ResolverClass = Type<IdempotencyIdentityResolver>;

function isResolverClass(identity: IdempotencyIdentity): identity is ResolverClass {
  return typeof (identity.prototype as Partial<IdempotencyIdentityResolver> | undefined)?.resolve === 'function';
}

/** A host-routed controller's host before the scope: escaped, it holds no ':', so hosts never share a key. */
const hostScoped = (request: HttpRequestLike, scope: string): string => `${escapeScope(requestHost(request))}@${scope}`;

/**
 * Whose key a request's is: the scope part of its store key, from the route's `identity` (and its
 * host on a host-routed controller).
 *
 * An `identity` option becomes a function: a function as it is, a resolver class as its instance
 * from the application's container (or built with the container's dependencies when no module
 * provides it). Each class is instantiated once; a REQUEST-scoped provider (or one that depends on
 * one) is resolved for each request, in that request's DI context, so it sees what the request's own
 * providers see.
 */
@Injectable()
export class IdentityResolverLoader {
  private readonly logger = new Logger('Idempotency');
  private readonly resolvers = new Map<IdempotencyIdentity, Promise<IdentityFunction>>();

  constructor(
    private readonly moduleRef: ModuleRef,
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: Pick<ResolvedIdempotencyOptions, 'maxScopeLength'>,
  ) {}

  /** The request's scope, escaped for the store key; synchronous for a route without `identity`. */
  scopeOf(request: HttpRequestLike, context: ExecutionContext, route: ResolvedRouteOptions): string | Promise<string> {
    if (!route.identity) return route.hostScoped ? hostScoped(request, UNSCOPED) : UNSCOPED;
    const scope = this.resolve(request, context, route);
    return route.hostScoped ? scope.then((resolved) => hostScoped(request, resolved)) : scope;
  }

  private async resolve(request: HttpRequestLike, context: ExecutionContext, route: ResolvedRouteOptions): Promise<string> {
    const raw = await (await this.load(route.identity!))(request, context);
    if (typeof raw !== 'string' || raw === '') {
      // The server's fault, not the client's: an empty scope would merge every caller into one.
      this.logger.error(LOGS.noScope(route.id, raw));
      throw IdempotencyException.of('scope-unresolved', MESSAGES.noScope);
    }
    const scope = escapeScope(raw);
    const problem = keyViolation(MESSAGES.scope, raw, scope.length, this.options.maxScopeLength);
    if (problem) throw IdempotencyException.of('scope-invalid', problem);
    return scope;
  }

  /**
   * Instantiates a resolver class ahead of the first request, so a missing dependency fails at
   * startup with a sentence naming the route and the option, not Nest's DI text.
   */
  async prepare(identity: IdempotencyIdentity | undefined, where: string): Promise<void> {
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
