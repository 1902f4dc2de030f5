import type { SqlExecutor } from './idempotency-transactions.interface.js';
import type { StoredResponse } from './stored-response.interface.js';

/** What a completed request leaves in the store. */
export interface IdempotencyRecord {
  /** Fingerprint of the request that produced {@link response}; a retry must match it. */
  readonly fingerprint: string;
  readonly response: StoredResponse;
}

/** A claim on a key while its first request runs. */
export interface IdempotencyClaim {
  /** Random token of the claimant: commit, release and renew act only for this owner. */
  readonly owner: string;
  readonly fingerprint: string;
  /** How long the claim lives unless renewed, in ms. */
  readonly leaseMs: number;
}

/** The answer to {@link IdempotencyStore.claim}. */
export type ClaimOutcome =
  /** The key was free and is now the caller's. */
  | { readonly state: 'claimed' }
  /** Another request holds the key and has not finished. */
  | { readonly state: 'in-flight'; readonly fingerprint: string }
  /** A request with this key finished; its record is returned. */
  | { readonly state: 'completed'; readonly record: IdempotencyRecord };

/**
 * The store contract the interceptor relies on. Every method is one atomic step (one round trip
 * for a remote store): there is no get-then-set anywhere, so two pods can never both win a key.
 *
 * Guarantees an implementation must give:
 * - `claim` inserts the claim only when the key holds nothing live, and otherwise returns what it holds.
 * - `commit`, `release` and `renew` change the key only while it still holds the caller's own claim
 *   (same `owner`); they return `false` and change nothing otherwise, so a request whose lease ran out
 *   can never overwrite or delete the claim or record of the request that took the key over.
 * - A claim expires after its lease, a record after the `ttlMs` it was committed with; an expired
 *   entry behaves as absent.
 * - A claim and the record that replaces it are one entry (for stores with a bound on entries).
 */
export interface IdempotencyStore {
  /** Claims `key`, or returns the claim or record that holds it. */
  claim(key: string, claim: IdempotencyClaim): Promise<ClaimOutcome>;
  /** Replaces the caller's claim with `record`, kept for `ttlMs`. */
  commit(key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean>;
  /** Deletes the caller's claim, freeing the key for a retry. */
  release(key: string, owner: string): Promise<boolean>;
  /** Extends the caller's claim to `leaseMs` from now. */
  renew(key: string, owner: string, leaseMs: number): Promise<boolean>;
  /**
   * {@link commit}, as a statement on `sql`: the connection of the caller's own transaction, so the
   * record commits with the handler's writes or not at all. Only stores with it serve
   * `transactional: true` routes (PostgresStore).
   */
  completeIn?(sql: SqlExecutor, key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean>;
  /**
   * Prepares what the store needs (a connection, its schema); called once when the module initialises.
   * A rejection fails the application's start. Without it, a store prepares itself on first use.
   */
  open?(): Promise<void>;
  /** Frees what the store itself opened (connections, timers); called on application shutdown. */
  close?(): Promise<void>;
}
