import { Inject, Injectable, type OnModuleInit, RequestMethod, StreamableFile } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { ResolvedIdempotencyOptions } from '../shared/interfaces/resolved-options.interface.js';
import {
  GRAPHQL_RESOLVER_TYPE_METADATA,
  IDEMPOTENCY_MODULE_OPTIONS,
  IDEMPOTENCY_TRANSPORTS,
  NEST_METHOD_METADATA,
  NEST_RESPONSE_PARAM_TYPES,
  NEST_RESPONSE_PASSTHROUGH_METADATA,
  NEST_ROUTE_ARGS_METADATA,
  NEST_SSE_METADATA,
  SAFE_METHODS,
} from '../shared/idempotency.constants.js';
import { CONFIG_ERRORS } from '../shared/messages/config.messages.js';
import { IdentityResolverLoader } from '../core/identity-resolver.loader.js';
import type { IdempotencyTransport } from '../core/idempotency-transport.interface.js';
import { MessageAcknowledger } from '../transports/messages/message.acknowledger.js';
import { findIdempotentHandlers, findStrayKeyReaders, servedBy } from './idempotent-handlers.finder.js';
import { RouteOptionsRegistry } from './route-options.registry.js';

/**
 * Checks every `@Idempotent()` handler at bootstrap: its options, its identity resolver, and that
 * its response can be recorded at all. A handler that can't be replayed must fail the start,
 * not leave keys stuck in flight at run time.
 */
@Injectable()
export class IdempotencyExplorer implements OnModuleInit {
  constructor(
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly routes: RouteOptionsRegistry,
    private readonly identities: IdentityResolverLoader,
    private readonly acks: MessageAcknowledger,
    @Inject(IDEMPOTENCY_TRANSPORTS) private readonly transports: ReadonlyMap<string, IdempotencyTransport> = new Map(),
  ) {}

  async onModuleInit(): Promise<void> {
    await this.exploreProviders();
    const [stray] = findStrayKeyReaders(this.discovery, this.scanner, this.routes, servedBy(this.options));
    if (stray) throw new Error(`@IdempotencyKey() on ${stray}: ${CONFIG_ERRORS.keyWithoutIdempotent}`);
    for (const { type, name, handler, where } of findIdempotentHandlers(
      this.discovery,
      this.scanner,
      this.routes,
      servedBy(this.options),
    )) {
      this.refuseUnreplayable(where, type, name, handler);
      const route = this.routes.resolve(type, handler, where);
      // A stream is never stored. Only a declared return type shows here (an async method's is
      // Promise): a stream returned at run time frees the key (or, transactional, is rolled back).
      if (Reflect.getMetadata('design:returntype', type.prototype, name) === StreamableFile) {
        throw new Error(
          `${where}: ${route.settling === 'transaction' ? CONFIG_ERRORS.transactionalStreamType : CONFIG_ERRORS.streamType}`,
        );
      }
      await this.identities.prepare(route.identity, `${where} (its identity option)`);
      if (route.message?.ack === true) this.acks.register(handler);
    }
  }

  /**
   * A provider's method is deduplicated only as a GraphQL `@Mutation()` resolver or a handler a
   * transport claims: on any other (a query, a service) `@Idempotent()` would do nothing, and a
   * decorator that promises deduplication and silently does nothing is the worst outcome. Message
   * handlers of controllers are explored with the routes.
   */
  private async exploreProviders(): Promise<void> {
    const seen = new Set<object>();
    const serves = servedBy(this.options);
    for (const wrapper of this.discovery.getProviders()) {
      const type = wrapper.metatype as { name: string; prototype?: Record<string, unknown> } | null | undefined;
      if (!type?.prototype || seen.has(type) || wrapper.inject) continue;
      seen.add(type);
      for (const name of this.scanner.getAllMethodNames(type.prototype)) {
        const handler = type.prototype[name];
        if (typeof handler !== 'function' || !this.routes.isIdempotent(handler)) continue;
        const where = `@Idempotent() on ${type.name}.${name}()`;
        const resolverType = Reflect.getMetadata(GRAPHQL_RESOLVER_TYPE_METADATA, handler) as string | undefined;
        if (resolverType === undefined) {
          if (!this.claimed(handler as (...args: never[]) => unknown)) throw new Error(`${where}: ${CONFIG_ERRORS.notARoute}`);
        } else if (resolverType !== 'Mutation') throw new Error(`${where}: ${CONFIG_ERRORS.notAMutation(resolverType)}`);
        if (!serves(wrapper.host)) continue;
        const route = this.routes.resolve(type, handler, where);
        await this.identities.prepare(route.identity, `${where} (its identity option)`);
      }
    }
  }

  private claimed(handler: (...args: never[]) => unknown): boolean {
    for (const transport of this.transports.values()) if (transport.handlesProviderMethod?.(handler)) return true;
    return false;
  }

  private refuseUnreplayable(where: string, type: object, name: string, handler: object): void {
    if (Reflect.getMetadata(NEST_SSE_METADATA, handler)) {
      throw new Error(`${where}: ${CONFIG_ERRORS.sse}`);
    }
    if (SAFE_METHODS.has(RequestMethod[Reflect.getMetadata(NEST_METHOD_METADATA, handler) as RequestMethod])) {
      throw new Error(`${where}: ${CONFIG_ERRORS.safeMethod}`);
    }
    const args = (Reflect.getMetadata(NEST_ROUTE_ARGS_METADATA, type, name) ?? {}) as Record<string, unknown>;
    const takesResponse = Object.keys(args).some((k) => NEST_RESPONSE_PARAM_TYPES.includes(Number(k.split(':')[0])));
    if (takesResponse && !Reflect.getMetadata(NEST_RESPONSE_PASSTHROUGH_METADATA, type, name)) {
      throw new Error(`${where}: ${CONFIG_ERRORS.ownResponse}`);
    }
  }
}
