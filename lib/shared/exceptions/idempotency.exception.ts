import { HttpException } from '@nestjs/common';
import { NO_HEADERS, RETRY_AFTER } from '../idempotency.constants.js';
import type { IdempotencyErrorCode } from '../interfaces/idempotency-error.interface.js';
import { IDEMPOTENCY_ERRORS } from './idempotency-errors.table.js';

/**
 * An error this module answers with: small JSON `{"error": "<sentence>"}` (or problem details),
 * never client bytes, a stack trace or a path. Extends HttpException, so even a filter that is not
 * ours sends the right status.
 */
export class IdempotencyException extends HttpException {
  /**
   * The module's answer for `code`, with its status and `Retry-After` from the errors table.
   * `status` is only for `response-too-large`, whose status is the response's own.
   */
  static of(code: IdempotencyErrorCode, message: string, status?: number): IdempotencyException {
    const answer = IDEMPOTENCY_ERRORS[code];
    return new IdempotencyException(answer.status ?? status!, message, answer.retryAfter ? RETRY_AFTER : NO_HEADERS, code);
  }

  constructor(
    status: number,
    readonly reason: string,
    /** Extra response headers, e.g. `Retry-After`. */
    readonly headers: Readonly<Record<string, string>> = {},
    /** What went wrong; `undefined` on an exception an application made itself. */
    readonly code?: IdempotencyErrorCode,
  ) {
    super({ error: reason }, status);
    // HttpException names an object response by the class: a log line or a consumer's catch reads the sentence.
    this.message = reason;
  }
}
