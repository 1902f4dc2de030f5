import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import { IDEMPOTENCY_KEY_PROPERTY } from '../idempotency.constants.js';

/**
 * The validated `Idempotency-Key` of the request, to hand on to downstream services that
 * deduplicate too (a payment provider). `undefined` when a pass-through route got no key.
 */
export const IdempotencyKey = createParamDecorator(
  (_data: unknown, context: ExecutionContext): string | undefined =>
    context.switchToHttp().getRequest<Record<symbol, string | undefined>>()[IDEMPOTENCY_KEY_PROPERTY],
);
