import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import { keyOf } from '../../transports/http/request-key.store.js';

/** What `@IdempotencyKey()` reads; the route registry looks for it to know which handlers take the key. */
export function readIdempotencyKey(_data: unknown, context: ExecutionContext): string | undefined {
  return keyOf(context.switchToHttp().getRequest<object>());
}

/**
 * The validated `Idempotency-Key` of the request, to hand on to downstream services that
 * deduplicate too (a payment provider). `undefined` when a pass-through route got no key.
 */
export const IdempotencyKey = createParamDecorator(readIdempotencyKey);
