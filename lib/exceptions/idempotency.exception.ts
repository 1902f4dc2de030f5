import { HttpException } from '@nestjs/common';
import type { IdempotencyErrorCode } from '../interfaces/idempotency-error.interface.js';

/**
 * An error this module answers with: small JSON `{"error": "<sentence>"}` (or problem details),
 * never client bytes, a stack trace or a path. Extends HttpException, so even a filter that is not
 * ours sends the right status.
 */
export class IdempotencyException extends HttpException {
  constructor(
    status: number,
    readonly reason: string,
    /** Extra response headers, e.g. `Retry-After`. */
    readonly headers: Readonly<Record<string, string>> = {},
    /** What went wrong; `undefined` on an exception an application made itself. */
    readonly code?: IdempotencyErrorCode,
  ) {
    super({ error: reason }, status);
  }
}
