import type { AbandonedRun, PhaseAdvance, RecoveryPoint } from './recovery-point.interface.js';
import type { SqlExecutor } from './idempotency-transactions.interface.js';
import type { StoredResponse } from './stored-response.interface.js';

/** What a completed request leaves in the store. */
export interface IdempotencyRecord {
  /** Fingerprint of the request that produced {@link response}; a retry must match it. */
  readonly fingerprint: string;
  readonly response: StoredResponse;
  /**
   * With the module's `encryption` on: the response, sealed (key id, IV, tag, ciphertext), and
   * `response` empty (status 0, no headers, no body). A store keeps it as it keeps the rest.
   */
  readonly sealed?: Buffer;
}

/** A key and the owner token of the claim on it, for {@link IdempotencyStore.renewAll}. */
export interface OwnedKey {
  readonly key: string;
  readonly owner: string;
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
  | { readonly state: 'completed'; readonly record: IdempotencyRecord }
  /**
   * A request with this key finished, but its record cannot be read here: it was written in a newer
   * format (a rolling deploy is under way). The key is neither replayed nor taken over.
   */
  | { readonly state: 'unreadable'; readonly reason: string };

/** What a key holds: a claim or a record (readable or not). */
export type HeldEntry = Exclude<ClaimOutcome, { state: 'claimed' }>;

/** What {@link IdempotencyStore.peek} finds under a key: its claim or record, and when that expires (epoch ms). */
export type PeekedEntry = HeldEntry & { readonly expiresAt: number };

/** What the application's routes need of a store, for {@link IdempotencyStore.ping}. */
export interface StoreNeeds {
  /** Some route has `atomicPhases: true` (or a completer runs): {@link IdempotencyStore.recoveryPoint} and the rest must work. */
  readonly recoveryPoints?: boolean;
}

/**
 * The store contract the interceptor relies on. Every method is one atomic step (one round trip
 * for a remote store): there is no get-then-set anywhere, so two pods can never both win a key.
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
   * {@link renew} for many claims in one step (one statement, script batch or transaction): what the
   * lease renewer sends once per tick, so renewals never grow into one round trip per running
   * handler. Answers, in order, whether each claim was renewed. Without it, claims are renewed one by one.
   */
  renewAll?(claims: readonly OwnedKey[], leaseMs: number): Promise<boolean[]>;
  /**
   * Registers the one listener for records the store evicts before their ttl (a bounded store making
   * room), called with the store key; for the `evicted` event. Stores that never evict leave it out.
   */
  watchEvictions?(listener: (key: string) => void): void;
  /**
   * Resolves when the store answers a trivial request (PING, `SELECT 1`), rejects with its error
   * otherwise: what `IdempotencyHealthIndicator` asks. Cheap, and never touches a key. `needs` names
   * what the application's routes use: a store that cannot serve it (a missing table) rejects.
   */
  ping?(needs?: StoreNeeds): Promise<void>;
  /**
   * What the key holds, read without changing it (no claim, no touch): for inspection by an operator
   * (`IdempotencyAdmin`), never on the request path. `undefined` when it holds nothing live of ours.
   */
  peek?(key: string): Promise<PeekedEntry | undefined>;
  /**
   * Deletes what the key holds, claim or record, whoever owns it: not fenced, for an operator who frees
   * a stuck key (`IdempotencyAdmin`), never on the request path. `true` when something live was deleted.
   */
  forget?(key: string): Promise<boolean>;
  /**
   * {@link commit}, as a statement on `sql`: the connection of the caller's own transaction, so the
   * record commits with the handler's writes or not at all, and only within the claim's lease (the
   * route's `transactionTimeoutMs`, never renewed). Only stores with it serve `transactional: true`
   * routes (PostgresStore).
   */
  completeIn?(sql: SqlExecutor, key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean>;
  /**
   * The recovery point of `key`'s phased run (`atomicPhases` routes): the results of the phases it
   * committed, or `undefined` when none did (or the run finished). Only stores with it, {@link advanceIn}
   * and {@link finishIn} serve `atomicPhases` routes (PostgresStore).
   */
  recoveryPoint?(key: string): Promise<RecoveryPoint | undefined>;
  /**
   * Adds a phase's result to the recovery point of the caller's claim, as a statement on `sql` (the
   * phase's own transaction), and renews the claim's lease: fenced, `false` when the claim is not the
   * caller's any more. The claim stays locked until that transaction ends.
   */
  advanceIn?(sql: SqlExecutor, key: string, owner: string, point: PhaseAdvance): Promise<boolean>;
  /**
   * Takes up to `limit` abandoned runs of a `@PhasedWorkflow()`: recovery point live and unfinished,
   * untouched for `idleMs`, key not held by a live claim. Marks each touched, so it is taken again
   * only `idleMs` later, and by one process at a time. For `IdempotencyCompleter`.
   */
  abandonedRuns?(idleMs: number, limit: number): Promise<AbandonedRun[]>;
  /** {@link completeIn} that also deletes the key's recovery point: the phased run's last statement. */
  finishIn?(sql: SqlExecutor, key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean>;
  /**
   * Tells every process listening ({@link listen}) that `key` settled: its claim was committed or
   * released. Called for routes with `inFlight: 'wait'` only, after the commit or release.
   */
  announce?(key: string): Promise<void>;
  /**
   * Registers the one listener of this process for {@link announce}d keys, on one connection of its
   * own whatever the number of waiters; resolves once announcements are heard. Called once, when a
   * duplicate first waits. Without `listen` and `announce`, waiting duplicates are woken only by
   * requests of their own process; others are found when they look again (about once a lease) or
   * their wait runs out. `resumed` is called when a lost listening connection is back: what was
   * announced meanwhile is unheard, so every waiter looks again.
   */
  listen?(listener: (key: string) => void, resumed?: () => void): Promise<void>;
  /**
   * Prepares what the store needs (a connection, its schema); called once when the module initialises.
   * A rejection fails the application's start. Without it, a store prepares itself on first use.
   */
  open?(): Promise<void>;
  /** Frees what the store itself opened (connections, timers); called on application shutdown. */
  close?(): Promise<void>;
}
