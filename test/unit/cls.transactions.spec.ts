import { describe, expect, it } from '@jest/globals';
import { clsTransactions } from '../../lib/index.js';
import type { TransactionHostLike } from '../../lib/stores/index.js';

// The adapter's own logic. The real TransactionHost (nestjs-cls, TypeORM) runs it in the ledger
// pods: jest cannot load nestjs-cls next to Nest's ES modules on Node 20.

/** A host whose transaction is `tx` inside withTransaction() and absent outside it. */
function host<Tx>(tx: Tx): TransactionHostLike<Tx | undefined> & { runs: number } {
  let active: Tx | undefined;
  return {
    runs: 0,
    get tx() {
      return active;
    },
    async withTransaction<R>(fn: () => Promise<R>): Promise<R> {
      this.runs++;
      active = tx;
      try {
        return await fn();
      } finally {
        active = undefined;
      }
    },
  };
}

describe('clsTransactions', () => {
  it("runs the work in withTransaction() and queries the transaction's tx.query(text, values)", async () => {
    const seen: unknown[] = [];
    const txHost = host({ query: (text: string, values: unknown[]) => (seen.push([text, values]), Promise.resolve([{ n: 1 }])) });
    const result = await clsTransactions(txHost).run((sql) => sql.query('SELECT $1', [7]));
    expect(result).toEqual([{ n: 1 }]);
    expect(seen).toEqual([['SELECT $1', [7]]]);
    expect(txHost.runs).toBe(1);
  });

  it("takes the rows of a node-postgres result, and a query function of the caller's for other clients", async () => {
    const pgClient = host({ query: () => Promise.resolve({ rows: [{ n: 2 }], rowCount: 1 }) });
    expect(await clsTransactions(pgClient).run((sql) => sql.query('x', []))).toEqual([{ n: 2 }]);
    const kysely = host({ executeQuery: (q: { sql: string }) => Promise.resolve({ rows: [{ q: q.sql }] }) });
    const port = clsTransactions(kysely, (tx, text) => tx!.executeQuery({ sql: text }));
    expect(await port.run((sql) => sql.query('SELECT 1', []))).toEqual([{ q: 'SELECT 1' }]);
  });

  it('refuses an answer that holds no rows, naming what to pass instead', async () => {
    for (const answer of [undefined, null, 3, { rowCount: 1 }]) {
      const txHost = host({ query: () => Promise.resolve(answer) });
      await expect(clsTransactions(txHost).run((sql) => sql.query('x', []))).rejects.toThrow(
        'the transactions executor returned neither rows nor a result with rows: give clsTransactions() a query that does',
      );
    }
  });
});
