import type { IdempotencyIdentity } from './identity-resolver.interface.js';

/** Per-route overrides given to `@Idempotent()`; anything left out comes from the module options. */
export interface IdempotentOptions {
  /** How long this route's responses are kept, in ms. */
  ttlMs?: number;
  /** This route's caller scope, replacing the module's `identity`. */
  identity?: IdempotencyIdentity;
  /** What to do when this route's request has no key. */
  missingHeader?: MissingHeaderPolicy;
  /**
   * Exactly-once with your database: the handler runs inside one transaction of the module's
   * `transactions` port, and its idempotency record is committed as that transaction's last statement.
   * Needs `PostgresStore`. Default `false`. See the README, "Exactly-once with your database".
   */
  transactional?: boolean;
}

/** `'reject'`: answer 400. `'pass-through'`: run the handler without deduplication, store nothing. */
export type MissingHeaderPolicy = 'reject' | 'pass-through';
