/**
 * What went wrong, as a stable identifier: the last segment of the problem type URI with
 * `errorFormat: 'problem+json'`, and what an application's own error shape can switch on.
 */
export type IdempotencyErrorCode =
  | 'key-missing'
  | 'key-invalid'
  | 'key-reused'
  | 'key-in-flight'
  | 'body-unread'
  | 'body-too-deep'
  | 'scope-invalid'
  | 'scope-unresolved'
  | 'store-unavailable'
  | 'transaction-timed-out'
  | 'not-committed'
  | 'record-unreadable'
  | 'response-too-large'
  | 'result-unstorable'
  | 'too-many-mutations'
  | 'phases-changed'
  | 'shutting-down'
  | 'transaction-aborted';

/** What `errorBody` is given to build an error body from. */
export interface IdempotencyErrorInfo {
  /** The HTTP status the response has (400, 409, 415, 422, 500 or 503). */
  readonly status: number;
  /** What went wrong; `undefined` for an `IdempotencyException` an application made itself. */
  readonly code: IdempotencyErrorCode | undefined;
  /** The module's sentence for it: never the key, the body or another byte the client sent. */
  readonly message: string;
}

/**
 * Builds the body of the module's own errors in an API's own shape, e.g. Stripe's
 * `{ error: { type: 'idempotency_error', message } }`. What it returns is written as JSON.
 */
export type IdempotencyErrorBody = (error: IdempotencyErrorInfo) => unknown;
