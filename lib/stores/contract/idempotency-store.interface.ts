import type {
  AbandonedRuns,
  BatchRenewal,
  EvictionWatch,
  HealthCheck,
  Inspection,
  RecoveryPoints,
  SettleAnnouncements,
  StoreLifecycle,
  TransactionalCompletion,
} from './store-capabilities.interface.js';
import type { ClaimOutcome, IdempotencyClaim, IdempotencyRecord } from './store-entries.interface.js';

export type {
  ClaimOutcome,
  HeldEntry,
  IdempotencyClaim,
  IdempotencyRecord,
  OwnedKey,
  PeekedEntry,
  StoreNeeds,
} from './store-entries.interface.js';

/**
 * What every store has: the four fenced steps of a key, the contract the module relies on. Every
 * method is one atomic step (one round trip for a remote store): there is no get-then-set anywhere,
 * so two pods can never both win a key.
 *
 * Guarantees an implementation must give:
 * - `claim` inserts the claim only when the key holds nothing live, and otherwise returns what it holds.
 * - `commit`, `release` and `renew` change the key only while it still holds the caller's own claim
 *   (same `owner`); they return `false` and change nothing otherwise, so a request whose lease ran out
 *   can never overwrite or delete the claim or record of the request that took the key over.
 * - A claim expires after its lease, a record after the `ttlMs` it was committed with; to `claim` an
 *   expired entry behaves as absent. The owner token is the fence, not the clock: the owner's
 *   `commit` still lands after its lease while nobody took the key over (on its lapsed claim, or on
 *   the empty key where the store dropped it), so a handler that outlived its lease in a stall is
 *   replayed, not run again.
 * - A claim and the record that replaces it are one entry (for stores with a bound on entries).
 */
export interface StoreCore {
  /** Claims `key`, or returns the claim or record that holds it. */
  claim(key: string, claim: IdempotencyClaim): Promise<ClaimOutcome>;
  /** Replaces the caller's claim with `record`, kept for `ttlMs`. */
  commit(key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean>;
  /** Deletes the caller's claim, freeing the key for a retry. */
  release(key: string, owner: string): Promise<boolean>;
  /** Extends the caller's claim to `leaseMs` from now. */
  renew(key: string, owner: string, leaseMs: number): Promise<boolean>;
}

/**
 * A store: {@link StoreCore}, and each optional capability it has (see store-capabilities.interface.ts).
 * A capability is all or nothing: the module checks it where a feature needs it, at startup
 * (`transactional`, `atomicPhases`) or on first use (health, admin, the completer).
 */
export interface IdempotencyStore
  extends
    StoreCore,
    Partial<BatchRenewal>,
    Partial<EvictionWatch>,
    Partial<HealthCheck>,
    Partial<Inspection>,
    Partial<TransactionalCompletion>,
    Partial<RecoveryPoints>,
    Partial<AbandonedRuns>,
    Partial<SettleAnnouncements>,
    Partial<StoreLifecycle> {}
