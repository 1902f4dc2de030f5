import type { StoredResponse } from '../interfaces/stored-response.interface.js';

/**
 * Carries a stored response from the interceptor to the idempotency filter, which sends it as it is.
 * Going through the filter bypasses the outer interceptors and the framework's serializer, which
 * already shaped the stored bytes the first time. Not an Error: a replay is no failure, and it
 * should not pay for a stack trace on every retry.
 */
export class IdempotentReplay {
  constructor(readonly response: StoredResponse) {}
}
