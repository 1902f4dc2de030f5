import type { StoredResponse } from '../interfaces/stored-response.interface.js';

/**
 * The protocol's answer for a key that is done: the stored response, which the interceptor sends as
 * it is and then throws on, so that outer interceptors and the framework's serializer (which shaped
 * those bytes the first time) see no success to work on, and the idempotency filter swallows it.
 * Not an Error: a replay is no failure, and it should not pay for a stack trace on every retry.
 */
export class IdempotentReplay {
  constructor(readonly response: StoredResponse) {}
}
