import type { SqlStoreOptions } from '../shared/sql-store.options.js';

/**
 * The parts of a better-sqlite3 `Database` the store uses. Declared here so that the package's types
 * never name better-sqlite3, which is an optional peer dependency.
 */
export interface SqliteDatabaseLike {
  prepare(sql: string): SqliteStatementLike;
  exec(sql: string): unknown;
  pragma(source: string, options?: { simple?: boolean }): unknown;
  transaction<A extends unknown[], R>(fn: (...args: A) => R): { immediate(...args: A): R };
  close(): unknown;
  /** Whether a transaction is open on the connection. */
  readonly inTransaction: boolean;
}

/** A prepared statement of {@link SqliteDatabaseLike}. */
export interface SqliteStatementLike {
  run(...params: unknown[]): { changes: number };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}

/** Options of `SqliteStore`: a file (the store's own connection) or the application's open database. */
export interface SqliteStoreOptions extends SqlStoreOptions {
  /** Path of the database file the store opens, owns and closes; `':memory:'` for a private one. */
  filename?: string;
  /** An open better-sqlite3 `Database` the application owns: the store uses it and never closes it. */
  database?: SqliteDatabaseLike;
  /**
   * How long a statement waits for another process's write lock, in ms; past it the claim answers
   * 503. The wait is asynchronous (short tries with pauses between), so the event loop keeps serving
   * other requests meanwhile. Default `1_000`.
   */
  busyTimeoutMs?: number;
  /**
   * SQLite's `synchronous` for the file the store opens (WAL mode). `'normal'` (the default, as
   * better-sqlite3 builds SQLite) syncs the log at checkpoints: a record survives the process crashing,
   * but a power cut or an OS crash may forget the last ones, and a retry would then run its handler
   * again. `'full'` syncs at each commit, so a stored response survives a power cut; on the bench
   * machine it halved first requests per second (each sync blocks the event loop).
   */
  synchronous?: 'full' | 'normal';
  /** Clock in epoch ms; tests inject one. Default `Date.now`. */
  now?: () => number;
}

export const DEFAULT_BUSY_TIMEOUT_MS = 1_000;
