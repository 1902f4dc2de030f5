import { applyDecorators, SetMetadata, UseFilters, UseInterceptors } from '@nestjs/common';
import { IDEMPOTENT_ROUTE_METADATA } from '../../shared/idempotency.constants.js';
import { IdempotencyExceptionFilter } from '../idempotency.filter.js';
import { IdempotencyInterceptor } from '../idempotency.interceptor.js';
import type { IdempotentOptions } from '../../shared/interfaces/idempotent-options.interface.js';

/**
 * Makes a route run at most once per `Idempotency-Key`: a retry with the same key gets the stored
 * response, a concurrent duplicate 409, a key reused for another request 422.
 *
 * @param options per-route overrides of the module options
 */
export function Idempotent(options: IdempotentOptions = {}): MethodDecorator {
  return applyDecorators(
    SetMetadata(IDEMPOTENT_ROUTE_METADATA, options),
    UseInterceptors(IdempotencyInterceptor),
    UseFilters(IdempotencyExceptionFilter),
  );
}
