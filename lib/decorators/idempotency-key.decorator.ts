import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import { keyOf } from '../http/request-key.store.js';

/**
 * The validated `Idempotency-Key` of the request, to hand on to downstream services that
 * deduplicate too (a payment provider). `undefined` when a pass-through route got no key.
 */
export const IdempotencyKey = createParamDecorator((_data: unknown, context: ExecutionContext): string | undefined =>
  keyOf(context.switchToHttp().getRequest<object>()),
);
