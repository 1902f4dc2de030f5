/** DI token of the ledger sample's {@link LedgerOptions}. */
export const LEDGER_OPTIONS = Symbol('LEDGER_OPTIONS');

/** How the ledger sample runs (see sample/main.ts for the environment variables). */
export interface LedgerOptions {
  /** PostgreSQL connection string: the charges and, with `store: 'postgres'`, the idempotency records. */
  databaseUrl: string;
  /**
   * `'postgres'` (default): PostgresStore and a transactional route, exactly-once with the charge.
   * `'redis'`: RedisStore and a plain route, the cache-style contrast the tests show failing.
   */
  store: 'postgres' | 'redis';
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
   * sent (or, for a consumed message, before the delivery is acked).
   */
  fault?: 'after-commit';
}
