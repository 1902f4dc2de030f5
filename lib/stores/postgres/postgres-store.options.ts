import type { SqlStoreOptions } from '../shared/sql-store.options.js';

/**
 * The parts of a node-postgres `Pool` the store uses. Declared here so that the package's types never
 * name `pg`, which is an optional peer dependency.
 */
export interface PostgresPoolLike {
  query(config: {
    text: string;
    values?: unknown[];
    query_timeout?: number;
    /** A prepared statement's name: node-postgres parses it once per connection. */
    name?: string;
  }): Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }>;
  end(): Promise<void>;
  /** A client of its own (node-postgres `Pool.connect()`): used for records over 1 MiB, whose statement timeout is scaled to their size. */
  connect?(): Promise<unknown>;
  // `any`, as node-postgres declares it: anything narrower would refuse a real Pool.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  on(event: 'error', listener: (...args: any[]) => void): unknown;
}

/** Options of `PostgresStore`: a connection string (the store's own pool) or the application's pool. */
export interface PostgresStoreOptions extends SqlStoreOptions {
  /** `postgres://…` of a small pool the store creates, owns and closes on shutdown. */
  connectionString?: string;
  /** A `pg.Pool` the application owns: the store uses it and never closes it. */
  pool?: PostgresPoolLike;
  /** The schema holding the table. Default `'public'`. */
  schema?: string;
  /**
   * Bound on each statement, in ms: on the server (`statement_timeout`, own pool) and on the client
   * (`query_timeout`, half a second later, so that the server's cancel, which leaves no trace, comes
   * first: a claim answered 503 never lands afterwards). A claim past it answers 503. Default `1_000`.
   * With a `pool` of your own, set `statement_timeout` on it for the same guarantee.
   */
  statementTimeoutMs?: number;
  /** Connections of the store's own pool. Default 4. */
  poolSize?: number;
  /**
   * Run the store's statements as named prepared statements, parsed and planned once per connection:
   * a third more first requests per second than unnamed ones (docs/performance.md). Default `true`.
   * Set `false` behind PgBouncer in transaction mode before 1.21, or with `max_prepared_statements = 0`.
   */
  preparedStatements?: boolean;
}

export const DEFAULT_POSTGRES_SCHEMA = 'public';
export const DEFAULT_STATEMENT_TIMEOUT_MS = 1_000;
export const DEFAULT_POOL_SIZE = 4;

/**
 * How much longer the client waits than the server's `statement_timeout`. The server's cancel
 * guarantees the statement had no effect; the client's own timeout does not (the statement runs on,
 * and a claim answered 503 could still land once a lock it waited on is released, holding the key
 * for a lease with no handler). So the server's comes first wherever it can answer, and the client's
 * is left for a server that no longer does.
 */
export const SERVER_FIRST_MS = 500;
