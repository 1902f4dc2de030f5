import { AsyncLocalStorage } from 'node:async_hooks';
import type pg from 'pg';
import type { IdempotencyTransactions } from '../../lib/index.js';
import type { SqlExecutor } from '../../lib/stores/index.js';

/** What a test can do to a transaction between its last statement and COMMIT. */
export type BeforeCommit = (client: pg.PoolClient) => Promise<void> | void;

/**
 * A real `IdempotencyTransactions` on a node-postgres pool, without nestjs-cls (which jest cannot
 * load next to Nest's ES modules on Node 20): BEGIN, the work, COMMIT, on one pooled client that a
 * handler reaches through {@link client}, as `txHost.tx` would give it. The CLS adapter itself runs
 * in the sample's ledger pods (test/postgres/ledger-pods.postgres.spec.ts).
 */
export class PgTransactions implements IdempotencyTransactions {
  private readonly current = new AsyncLocalStorage<pg.PoolClient>();
  /** Runs before each COMMIT (then reset): a fault a test injects. */
  beforeCommit: BeforeCommit | undefined;
  /** How many transactions committed. */
  commits = 0;

  constructor(
    private readonly pool: pg.Pool,
    private readonly isolation: 'READ COMMITTED' | 'REPEATABLE READ' | 'SERIALIZABLE' = 'READ COMMITTED',
  ) {}

  /** The client of the transaction the caller runs in. */
  get client(): pg.PoolClient {
    const client = this.current.getStore();
    if (!client) throw new Error('not inside a transaction');
    return client;
  }

  async run<T>(work: (sql: SqlExecutor) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    // A backend a test terminates emits 'error' on its client: unheard, it would end the process.
    const heard = (err: Error) => (broken = err);
    client.on('error', heard);
    try {
      await client.query(`BEGIN ISOLATION LEVEL ${this.isolation}`);
      const sql: SqlExecutor = { query: async (text, values) => (await client.query(text, values)).rows };
      const result = await this.current.run(client, () => work(sql));
      const fault = this.beforeCommit;
      this.beforeCommit = undefined;
      await fault?.(client);
      await client.query('COMMIT');
      this.commits++;
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch((e: Error) => (broken = e));
      throw err;
    } finally {
      client.off('error', heard);
      client.release(broken);
    }
  }
}
