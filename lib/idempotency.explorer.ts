import { Injectable, type OnModuleInit, RequestMethod, StreamableFile } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import {
  NEST_METHOD_METADATA,
  NEST_RESPONSE_PARAM_TYPES,
  NEST_RESPONSE_PASSTHROUGH_METADATA,
  NEST_ROUTE_ARGS_METADATA,
  NEST_SSE_METADATA,
  SAFE_METHODS,
} from './idempotency.constants.js';
import { CONFIG_ERRORS } from './idempotency.messages.js';
import { IdentityResolverLoader } from './identity-resolver.loader.js';
import { findIdempotentHandlers } from './idempotent-handlers.finder.js';
import { RouteOptionsAccessor } from './route-options.accessor.js';

/**
 * Checks every `@Idempotent()` handler at bootstrap: its options, its identity resolver, and that
 * its response can be recorded at all. A handler that can't be replayed must fail the start,
 * not leave keys stuck in flight at run time.
 */
@Injectable()
export class IdempotencyExplorer implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly routes: RouteOptionsAccessor,
    private readonly identities: IdentityResolverLoader,
  ) {}

  async onModuleInit(): Promise<void> {
    for (const { type, name, handler, where } of findIdempotentHandlers(this.discovery, this.scanner, this.routes)) {
      this.refuseUnreplayable(where, type, name, handler);
      const route = this.routes.get(type, handler, where);
      // A transactional response is committed before it is sent. Only a declared return type shows
      // here (an async method's is Promise): a stream returned at run time is rolled back.
      if (route.transactional && Reflect.getMetadata('design:returntype', type.prototype, name) === StreamableFile) {
        throw new Error(`${where}: ${CONFIG_ERRORS.transactionalStreamType}`);
      }
      await this.identities.prepare(route.identity);
    }
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
