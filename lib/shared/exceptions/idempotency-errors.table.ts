import type { IdempotencyErrorCode } from '../interfaces/idempotency-error.interface.js';

/** How the module answers each of its errors. */
export interface IdempotencyErrorAnswer {
  /** The HTTP status; `undefined` where it is the status of the response the error is about. */
  readonly status: number | undefined;
  /** Whether the error clears up by itself: the answer carries `Retry-After`, and the client retries with the same key. */
  readonly retryAfter: boolean;
}

/** Every error of the module, in one place: what a client gets for it. */
export const IDEMPOTENCY_ERRORS: Readonly<Record<IdempotencyErrorCode, IdempotencyErrorAnswer>> = {
  'key-missing': { status: 400, retryAfter: false },
  'key-invalid': { status: 400, retryAfter: false },
  'body-too-deep': { status: 400, retryAfter: false },
  'scope-invalid': { status: 400, retryAfter: false },
  'key-in-flight': { status: 409, retryAfter: true },
  'transaction-timed-out': { status: 409, retryAfter: true },
  'body-unread': { status: 415, retryAfter: false },
  'key-reused': { status: 422, retryAfter: false },
  'scope-unresolved': { status: 500, retryAfter: false },
  'transaction-aborted': { status: 500, retryAfter: false },
  'store-unavailable': { status: 503, retryAfter: true },
  'not-committed': { status: 503, retryAfter: true },
  'record-unreadable': { status: 503, retryAfter: true },
  'shutting-down': { status: 503, retryAfter: true },
  // Stored in place of a response too large to keep, with that response's status.
  'response-too-large': { status: undefined, retryAfter: false },
  // Recorded for a handler's value that JSON cannot hold (a BigInt, a cycle): it ran, and does not run again.
  'result-unstorable': { status: 500, retryAfter: false },
  // One GraphQL request past maxMutationsPerRequest: the client splits it; the ones before it ran.
  'too-many-mutations': { status: 400, retryAfter: false },
  // An atomicPhases run resumed by a handler whose phases changed: not continued until an operator acts.
  'phases-changed': { status: 500, retryAfter: false },
};
