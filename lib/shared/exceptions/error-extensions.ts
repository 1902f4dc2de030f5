import { IDEMPOTENCY_ERRORS } from './idempotency-errors.table.js';
import type { IdempotencyException } from './idempotency.exception.js';

/** What a caller outside HTTP (a message's sender, a GraphQL client) reads of the module's error. */
export interface IdempotencyErrorExtensions {
  /** `IDEMPOTENCY_` and the error's code in upper case: `IDEMPOTENCY_KEY_IN_FLIGHT`, … */
  readonly code: string;
  /** The HTTP status the same error has on a route. */
  readonly status: number;
  /** What `Retry-After` says on HTTP: the same call may be sent again later with the same key. */
  readonly retryable: boolean;
}

export function errorExtensions(err: IdempotencyException): IdempotencyErrorExtensions {
  return {
    code: `IDEMPOTENCY_${err.code!.toUpperCase().replace(/-/g, '_')}`,
    status: err.getStatus(),
    retryable: IDEMPOTENCY_ERRORS[err.code!].retryAfter,
  };
}
