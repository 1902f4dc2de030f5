import type { IdempotencyContext } from '../interfaces/idempotency-context.interface.js';
import type { InboxRunOptions } from '../interfaces/inbox-options.interface.js';
import { requestFingerprint } from '../utils/fingerprint.util.js';
import { escapeScope, UNSCOPED } from '../utils/key.util.js';

/**
 * A message as the protocol reads it (see `IdempotencyInbox`): its id is the key, the consumer and
 * its payload are the fingerprint, and there is no response to answer on (the caller gets results
 * and errors back from `run()`).
 */
export class InboxContext implements IdempotencyContext {
  readonly method = undefined;

  constructor(
    private readonly key: string,
    private readonly options: InboxRunOptions,
  ) {}

  sentKey(): string {
    return this.key;
  }

  check(): void {
    // A message's payload is given as a value: there is no unread body to refuse.
  }

  scope(): string {
    const { scope } = this.options;
    return scope === undefined ? UNSCOPED : escapeScope(scope);
  }

  fingerprint(): string {
    return requestFingerprint('MESSAGE', '', this.options.payload, this.options.consumer);
  }

  matches(stored: string, fingerprint: string): boolean {
    return stored === fingerprint;
  }

  answer(): void {
    // Nothing to write on: run() returns the replay and throws the module's errors.
  }
}
