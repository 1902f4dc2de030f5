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
  | 'not-committed';
