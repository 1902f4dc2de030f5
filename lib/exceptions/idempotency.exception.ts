import { HttpException } from '@nestjs/common';

/**
 * An error this module answers with: small JSON `{"error": "<sentence>"}`, never client bytes,
 * a stack trace or a path. Extends HttpException, so even a filter that is not ours sends the
 * right status.
 */
export class IdempotencyException extends HttpException {
  constructor(
    status: number,
    readonly reason: string,
    /** Extra response headers, e.g. `Retry-After`. */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super({ error: reason }, status);
  }
}
