import { type CallHandler, type ExecutionContext, Inject, Injectable, type NestInterceptor, Optional } from '@nestjs/common';
import type { Observable } from 'rxjs';
import type { IdempotencyTransport } from '../core/idempotency-transport.interface.js';
import { IDEMPOTENCY_TRANSPORTS } from '../shared/idempotency.constants.js';
import { CONFIG_ERRORS } from '../shared/messages/config.messages.js';
import { RouteOptionsRegistry } from './route-options.registry.js';

/**
 * Applied by `@Idempotent()`: hands the call to the transport of its context type (HTTP, RPC,
 * GraphQL) with the route's resolved options. A context no transport serves runs as if undecorated.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  // Optional so that a missing IdempotencyModule is named: Nest's own error lists injection tokens.
  constructor(
    @Optional() @Inject(IDEMPOTENCY_TRANSPORTS) private readonly transports: ReadonlyMap<string, IdempotencyTransport>,
    @Optional() private readonly routes: RouteOptionsRegistry,
  ) {
    if (!transports || !routes) throw new Error(CONFIG_ERRORS.moduleMissing);
  }

  intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const transport = this.transports.get(context.getType());
    if (!transport) return Promise.resolve(next.handle());
    return transport.handle(context, next, this.routes.resolve(context.getClass(), context.getHandler()));
  }
}
