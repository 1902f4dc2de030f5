import type { IdempotencyContext } from '../../shared/interfaces/idempotency-context.interface.js';
import type { InboxRunOptions } from '../../shared/interfaces/inbox-options.interface.js';
import { IdempotencyException } from '../../shared/exceptions/idempotency.exception.js';
import { MESSAGES } from '../../shared/messages/client.messages.js';
import { BodyTooDeepError, requestFingerprint } from '../../shared/utils/fingerprint.util.js';
import { escapeScope, surfaceScope, UNSCOPED } from '../../shared/utils/key.util.js';

/**
 * A message as the protocol reads it (see `IdempotencyInbox`): its id is the key, kept in the records
 * of its consumer (an inbox consumer's, or a message handler's) under its scope; its consumer and
 * payload are the fingerprint, and there is no response to answer on (the caller gets results and
 * errors back from `run()`).
 */
export class InboxContext implements IdempotencyContext {
  readonly method = undefined;
  readonly headerKey = false;

  constructor(
    private readonly key: string,
    private readonly options: InboxRunOptions,
    private readonly surface: 'inbox' | 'message' = 'inbox',
  ) {}

  sentKey(): string {
    return this.key;
  }

  check(): void {
    // A message's payload is given as a value: there is no unread body to refuse.
  }

  scope(): string {
    const { scope, consumer } = this.options;
    return surfaceScope(scope === undefined ? UNSCOPED : escapeScope(scope), this.surface, consumer);
  }

  fingerprint(): string {
    try {
      return requestFingerprint('MESSAGE', '', this.options.payload, this.options.consumer);
    } catch (err) {
      // The producer's fault, as HTTP's 400: no delivery of it can succeed.
      if (err instanceof BodyTooDeepError) throw IdempotencyException.of('body-too-deep', MESSAGES.tooDeep);
      throw err;
    }
  }

  matches(stored: string, fingerprint: string): boolean {
    return stored === fingerprint;
  }

  answer(): void {
    // Nothing to write on: run() returns the replay and throws the module's errors.
  }
}
