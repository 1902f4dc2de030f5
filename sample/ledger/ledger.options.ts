/** DI token of the ledger sample's {@link LedgerOptions}. */
export const LEDGER_OPTIONS = Symbol('LEDGER_OPTIONS');

/** How the ledger sample runs (see sample/main.ts for the environment variables). */
export interface LedgerOptions {
  /**
   * PostgreSQL (or, with `store: 'mysql'`, MySQL) connection string: the charges and, with a
   * transactional store, the idempotency records.
   */
  databaseUrl: string;
  /**
   * `'postgres'` (default): PostgresStore and a transactional route, exactly-once with the charge.
   * `'mysql'`: the same on MySQL or MariaDB with MySqlStore (charges only: no rides, whose recovery
   * points need PostgreSQL). `'redis'`: RedisStore and a plain route, the cache-style contrast the
   * tests show failing.
   */
  store: 'postgres' | 'mysql' | 'redis';
  redisUrl?: string;
  leaseMs?: number;
  transactionTimeoutMs?: number;
  /** A slow step after the charge is written, inside its transaction, in ms. */
  latencyMs: number;
  /**
   * RabbitMQ connection string: the ledger also consumes `charge.requested` events from
   * `ledger.charge-requests` (transactional store only).
   */
  rabbitmqUrl?: string;
  /**
   * `'after-commit'`: the process kills itself once the charge is committed, before the response is
   * sent (or, for a consumed message, before the delivery is acked); `'after-commit:<n>'` after the
   * process's n-th transaction (the rides route commits three: a ride's last is its response). On the rides route:
   * `'after:ride_created'`, `'before-record:charge_created'` (the provider charged, its answer not yet
   * recorded) and `'after:charge_created'`.
   */
  fault?: string;
  /** Runs the completer every this many ms (`IdempotencyCompleter`), for runs idle `completerIdleMs`. */
  completerIntervalMs?: number;
  completerIdleMs?: number;
  /** The payment provider of the rides route (`POST <url>/charges`); without it, a stand-in in the process. */
  providerUrl?: string;
}
