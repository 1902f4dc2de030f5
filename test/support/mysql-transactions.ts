import { AsyncLocalStorage } from 'node:async_hooks';
import type mysql from 'mysql2/promise';
import type { IdempotencyTransactions } from '../../lib/index.js';
import type { SqlExecutor } from '../../lib/stores/index.js';

/** What a test can do to a transaction between its last statement and COMMIT. */
export type BeforeMySqlCommit = (connection: mysql.PoolConnection) => Promise<void> | void;

/**
 * A real `IdempotencyTransactions` on a mysql2 pool, as an application without an ORM writes it:
 * BEGIN, the work, COMMIT on one pooled connection that a handler reaches through {@link connection}.
 * The SQL it is given takes `?` placeholders, MySQL's own.
 */
export class MySqlTransactions implements IdempotencyTransactions {
  private readonly current = new AsyncLocalStorage<mysql.PoolConnection>();
  /** Runs before each COMMIT (then reset): a fault a test injects. */
  beforeCommit: BeforeMySqlCommit | undefined;

  constructor(private readonly pool: mysql.Pool) {}

  /** The connection of the transaction the caller runs in. */
  get connection(): mysql.PoolConnection {
    const connection = this.current.getStore();
    if (!connection) throw new Error('not inside a transaction');
    return connection;
  }

  async run<T>(work: (sql: SqlExecutor) => Promise<T>): Promise<T> {
    const connection = await this.pool.getConnection();
    let broken = false;
    try {
      await connection.query('START TRANSACTION');
      const sql: SqlExecutor = { query: async (text, values) => (await connection.query(text, values))[0] as unknown[] };
      const result = await this.current.run(connection, () => work(sql));
      const fault = this.beforeCommit;
      this.beforeCommit = undefined;
      await fault?.(connection);
      await connection.query('COMMIT');
      return result;
    } catch (err) {
      await connection.query('ROLLBACK').catch(() => (broken = true));
      throw err;
    } finally {
      if (broken) connection.destroy();
      else connection.release();
    }
  }
}
