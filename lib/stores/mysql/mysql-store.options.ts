import type { SqlStoreOptions } from '../shared/sql-store.options.js';

/**
 * The parts of a mysql2 promise `Pool` (`mysql2/promise`'s `createPool`) the store uses. Declared
 * here so that the package's types never name `mysql2`, which is an optional peer dependency.
 */
export interface MySqlPoolLike {
  // `any` for the values, as mysql2 declares them: anything narrower would refuse a real Pool.
  /** A statement with `?` placeholders, sent as a server-side prepared statement. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  execute(options: { sql: string; timeout?: number }, values?: any): Promise<[unknown, unknown]>;
  /** A statement sent as text (the schema's DDL, which cannot be prepared). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  query(options: { sql: string; timeout?: number }, values?: any): Promise<[unknown, unknown]>;
  end(): Promise<void>;
}

/**
 * Options of `MySqlStore` (MySQL 8.0.29+ and MariaDB 10.6+, through mysql2 3): a connection URI (the
 * store's own pool) or the application's pool.
 */
export interface MySqlStoreOptions extends SqlStoreOptions {
  /** `mysql://user:password@host:3306/database` of a small pool the store creates, owns and closes on shutdown. */
  uri?: string;
  /**
   * A `mysql2/promise` pool the application owns: the store uses it and never closes it. Its
   * connections must be in autocommit mode (mysql2's default), as the claim procedure needs.
   */
  pool?: MySqlPoolLike;
  /**
   * Bound on each statement, in ms: on the server (`innodb_lock_wait_timeout` of the store's own
   * pool, rounded up to whole seconds, so a claim waiting on a row lock gives up on the server with no
   * trace) and on the client (half a second after that whole second). A claim past it answers 503.
   * Default `1_000`.
   */
  statementTimeoutMs?: number;
  /** Connections of the store's own pool. Default 4. */
  poolSize?: number;
}

export const DEFAULT_MYSQL_TIMEOUT_MS = 1_000;
export const DEFAULT_MYSQL_POOL_SIZE = 4;

/** How much longer the client waits than the server's lock wait timeout: the server's, which undoes the statement, comes first. */
export const MYSQL_SERVER_FIRST_MS = 500;

/** The server's lock wait for a statement timeout: InnoDB counts it in whole seconds. */
export const lockWaitSeconds = (timeoutMs: number): number => Math.max(1, Math.ceil(timeoutMs / 1000));
