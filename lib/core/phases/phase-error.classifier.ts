import { HttpException } from '@nestjs/common';

/** Client errors a retry can cure: a timeout, a conflict, too early, too many requests. */
const RETRYABLE_CLIENT_ERRORS: ReadonlySet<number> = new Set([408, 409, 425, 429]);

/**
 * Whether an error thrown inside a phase ends the run for good: an `HttpException` with a 4xx status
 * (a declined card, a refused ride) other than 408, 409, 425 and 429. A retry would meet it again, so
 * its response is stored and replayed. Anything else (a 5xx, a network error, a database error) is
 * retryable: the key is freed and the recovery point stays where it was.
 */
export function endsTheRun(err: unknown): boolean {
  if (!(err instanceof HttpException)) return false;
  const status = err.getStatus();
  return status >= 400 && status < 500 && !RETRYABLE_CLIENT_ERRORS.has(status);
}
