import { Injectable, type OnModuleInit, RequestMethod } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import {
  IDEMPOTENT_ROUTE_METADATA,
  NEST_METHOD_METADATA,
  NEST_RESPONSE_PARAM_TYPES,
  NEST_RESPONSE_PASSTHROUGH_METADATA,
  NEST_ROUTE_ARGS_METADATA,
  NEST_SSE_METADATA,
  SAFE_METHODS,
} from './idempotency.constants.js';
import { IdempotencyService } from './idempotency.service.js';

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
    private readonly service: IdempotencyService,
  ) {}

  async onModuleInit(): Promise<void> {
    for (const wrapper of this.discovery.getControllers()) {
      const type = wrapper.metatype as (new (...args: any[]) => unknown) | undefined;
      if (!type?.prototype) continue;
      const prototype = type.prototype as Record<string, unknown>;
      for (const name of this.scanner.getAllMethodNames(prototype)) {
        const handler = prototype[name];
        if (typeof handler !== 'function' || !Reflect.hasMetadata(IDEMPOTENT_ROUTE_METADATA, handler)) continue;
        const where = `@Idempotent() on ${type.name}.${name}()`;
        this.refuseUnreplayable(where, type, name, handler);
        const route = this.service.routeOptions(type, handler, where);
        await this.service.prepareIdentity(route.identity);
      }
    }
  }

  private refuseUnreplayable(where: string, type: object, name: string, handler: object): void {
    if (Reflect.getMetadata(NEST_SSE_METADATA, handler)) {
      throw new Error(`${where}: an @Sse() stream cannot be stored and replayed`);
    }
    if (SAFE_METHODS.has(RequestMethod[Reflect.getMetadata(NEST_METHOD_METADATA, handler) as RequestMethod])) {
      throw new Error(
        `${where}: GET, HEAD, OPTIONS and other safe methods change nothing and need no idempotency key; use it on POST, PUT, PATCH or DELETE`,
      );
    }
    const args = (Reflect.getMetadata(NEST_ROUTE_ARGS_METADATA, type, name) ?? {}) as Record<string, unknown>;
    const takesResponse = Object.keys(args).some((k) => NEST_RESPONSE_PARAM_TYPES.includes(Number(k.split(':')[0])));
    if (takesResponse && !Reflect.getMetadata(NEST_RESPONSE_PASSTHROUGH_METADATA, type, name)) {
      throw new Error(
        `${where}: @Res()/@Next() without { passthrough: true } leaves the response to the handler; use passthrough or return the body`,
      );
    }
  }
}
