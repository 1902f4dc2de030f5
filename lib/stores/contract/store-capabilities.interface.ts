import type { AbandonedRun, PhaseAdvance, RecoveryPoint } from '../../shared/interfaces/recovery-point.interface.js';
import type { SqlExecutor } from '../../shared/interfaces/idempotency-transactions.interface.js';
import type { IdempotencyRecord, OwnedKey, PeekedEntry, StoreNeeds } from './store-entries.interface.js';

// The optional capabilities of a store, one interface each: a store has all of a capability's
// methods or none. `IdempotencyStore` is the four fenced steps plus each of these, optional.

/** Renews many claims in one step: what the lease renewer prefers over one round trip per claim. */
export interface BatchRenewal {
  /**
   * `renew` for many claims in one step (one statement, script batch or transaction): what the lease
   * renewer sends once per tick, so renewals never grow into one round trip per running handler.
   * Answers, in order, whether each claim was renewed. Without it, claims are renewed one by one.
   */
  renewAll(claims: readonly OwnedKey[], leaseMs: number): Promise<boolean[]>;
}

/** A bounded store that evicts records early says so: for the `evicted` event. */
export interface EvictionWatch {
  /**
   * Registers the one listener for records the store evicts before their ttl (a bounded store making
   * room), called with the store key. Stores that never evict leave it out.
   */
  watchEvictions(listener: (key: string) => void): void;
}

/** What `IdempotencyHealthIndicator` asks. */
export interface HealthCheck {
  /**
   * Resolves when the store answers a trivial request (PING, `SELECT 1`), rejects with its error
   * otherwise. Cheap, and never touches a key. `needs` names what the application's routes use: a
   * store that cannot serve it (a missing table) rejects.
   */
  ping(needs?: StoreNeeds): Promise<void>;
}

/** What `IdempotencyAdmin` reads and deletes for an operator; never on the request path. */
export interface Inspection {
  /**
   * What the key holds, read without changing it (no claim, no touch). `undefined` when it holds
   * nothing live of ours.
   */
  peek(key: string): Promise<PeekedEntry | undefined>;
  /**
   * Deletes what the key holds, claim or record, whoever owns it: not fenced, for an operator who frees
   * a stuck key. `true` when something live was deleted.
   */
  forget(key: string): Promise<boolean>;
}

/** Serves `transactional: true` routes and inboxes: the record commits with the application's writes. */
export interface TransactionalCompletion {
  /**
   * `commit`, as a statement on `sql`: the connection of the caller's own transaction, so the record
   * commits with the handler's writes or not at all, and only within the claim's lease (the route's
   * `transactionTimeoutMs`, never renewed).
   */
  completeIn(sql: SqlExecutor, key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean>;
}

/** Serves `atomicPhases` routes: the recovery points of phased runs. */
export interface RecoveryPoints {
  /**
   * The recovery point of `key`'s phased run: the results of the phases it committed, or `undefined`
   * when none did (or the run finished).
   */
  recoveryPoint(key: string): Promise<RecoveryPoint | undefined>;
  /**
   * Adds a phase's result to the recovery point of the caller's claim, as a statement on `sql` (the
   * phase's own transaction), and renews the claim's lease: fenced, `false` when the claim is not the
   * caller's any more. The claim stays locked until that transaction ends.
   */
  advanceIn(sql: SqlExecutor, key: string, owner: string, point: PhaseAdvance): Promise<boolean>;
  /** `completeIn` that also deletes the key's recovery point: the phased run's last statement. */
  finishIn(sql: SqlExecutor, key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean>;
}

/** What `IdempotencyCompleter` looks for, on a store with {@link RecoveryPoints}. */
export interface AbandonedRuns {
  /**
   * Takes up to `limit` abandoned runs of a `@PhasedWorkflow()`: recovery point live and unfinished,
   * untouched for `idleMs`, key not held by a live claim. Marks each touched, so it is taken again
   * only `idleMs` later, and by one process at a time.
   */
  abandonedRuns(idleMs: number, limit: number): Promise<AbandonedRun[]>;
}

/**
 * Wakes waiting duplicates (`inFlight: 'wait'`) of other processes. Without it they are woken only by
 * requests of their own process; others are found when they look again (about once a lease) or their
 * wait runs out.
 */
export interface SettleAnnouncements {
  /**
   * Tells every process listening that `key` settled: its claim was committed or released. Called for
   * routes with `inFlight: 'wait'` only, after the commit or release.
   */
  announce(key: string): Promise<void>;
  /**
   * Registers the one listener of this process for announced keys, on one connection of its own
   * whatever the number of waiters; resolves once announcements are heard. Called once, when a
   * duplicate first waits. `resumed` is called when a lost listening connection is back: what was
   * announced meanwhile is unheard, so every waiter looks again.
   */
  listen(listener: (key: string) => void, resumed?: () => void): Promise<void>;
}

/** A store that opens connections or timers of its own; each method may be left out. */
export interface StoreLifecycle {
  /**
   * Prepares what the store needs (a connection, its schema); called once when the module initialises.
   * A rejection fails the application's start. Without it, a store prepares itself on first use.
   * `needs` says what the module will ask of it (the largest response it keeps).
   */
  open(needs?: StoreNeeds): Promise<void>;
  /** Frees what the store itself opened (connections, timers); called on application shutdown. */
  close(): Promise<void>;
}
