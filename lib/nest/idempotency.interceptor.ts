import { type CallHandler, type ExecutionContext, Inject, Injectable, type NestInterceptor } from '@nestjs/common';
import type { Observable } from 'rxjs';
import type { IdempotencyTransport } from '../core/idempotency-transport.interface.js';
import { IDEMPOTENCY_TRANSPORTS } from '../shared/idempotency.constants.js';
import { RouteOptionsRegistry } from './route-options.registry.js';

/**
 * Applied by `@Idempotent()`: hands the call to the transport of its context type (HTTP, RPC,
 * GraphQL) with the route's resolved options. A context no transport serves runs as if undecorated.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  constructor(
    @Inject(IDEMPOTENCY_TRANSPORTS) private readonly transports: ReadonlyMap<string, IdempotencyTransport>,
    private readonly routes: RouteOptionsRegistry,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const transport = this.transports.get(context.getType());
    if (!transport) return Promise.resolve(next.handle());
    return transport.handle(context, next, this.routes.resolve(context.getClass(), context.getHandler()));
  }
}
