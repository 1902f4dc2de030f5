import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import pg from 'pg';
import {
  type IdempotencyEvent,
  IdempotencyException,
  IdempotencyInbox,
  IdempotencyModule,
  PostgresStore,
} from '../../lib/index.js';
import type { SqlExecutor } from '../../lib/stores/index.js';
import { spyOnLogger } from '../support/logger.js';
import { PgTransactions } from '../support/pg-transactions.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { sleep, until } from '../support/timing.js';

const describePg = postgresAvailable('transactional inbox suite') ? describe : describe.skip;

let server: PostgresServer;
let pool: pg.Pool;
let n = 0;
const key = () => `order-${++n}`;
const codeOf = (err: unknown) => (err instanceof IdempotencyException ? err.code : err);

/** The consumer's business write: one row per order it handles, in the transaction it is given. */
const record = (order: string) => async (sql: SqlExecutor | undefined) => {
  const [row] = (await sql!.query('INSERT INTO shipments (order_id) VALUES ($1) RETURNING id', [order])) as { id: number }[];
  return { shipment: row.id };
};
const shipments = async (order: string) =>
  (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM shipments WHERE order_id = $1', [order])).rows[0].n;

describePg('IdempotencyInbox, transactional, on PostgreSQL', () => {
  const logs = spyOnLogger();
  const outcomes: [string, string][] = [];
  const apps: INestApplicationContext[] = [];

  beforeAll(async () => {
    server = await PostgresServer.start();
    const url = await server.createDatabase(`inbox_${process.pid}`);
    pool = new pg.Pool({ connectionString: url, max: 8 });
    pool.on('error', () => undefined);
    await pool.query('CREATE TABLE shipments (id serial PRIMARY KEY, order_id text NOT NULL)');
  }, 60_000);
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });
  afterAll(async () => {
    await pool?.end();
    await server?.destroy();
  });

  async function inbox(
    tx = new PgTransactions(pool),
    transactionTimeoutMs?: number,
  ): Promise<{ inbox: IdempotencyInbox; tx: PgTransactions }> {
    const store = new PostgresStore({ pool, sweepIntervalMs: 0 });
    const events = (e: IdempotencyEvent) => void outcomes.push([String(e.route), e.outcome]);
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ store, transactions: tx, transactionTimeoutMs, events })],
    }).compile();
    const app = await moduleRef.createNestApplication({ logger: false }).init();
    apps.push(app);
    return { inbox: app.get(IdempotencyInbox), tx };
  }

  it('commits the inbox record with the work: one shipment, and a redelivery gets its result', async () => {
    const { inbox: box } = await inbox();
    const order = key();
    const first = await box.run(order, { consumer: 'Shipping', transactional: true }, record(order));
    expect(first.duplicate).toBe(false);
    const again = await box.run(order, { consumer: 'Shipping', transactional: true }, record(order));
    expect(again).toEqual({ value: first.value, duplicate: true });
    expect(await shipments(order)).toBe(1);
    await until(() => outcomes.length === 2);
    expect(outcomes).toEqual([
      ['Shipping', 'executed'],
      ['Shipping', 'replayed'],
    ]);
  });

  it('work that throws after its write is rolled back with it, and the key is free', async () => {
    const { inbox: box } = await inbox();
    const order = key();
    const failing = async (sql: SqlExecutor | undefined) => {
      await record(order)(sql);
      throw new Error('label printer offline');
    };
    await expect(box.run(order, { consumer: 'Shipping', transactional: true }, failing)).rejects.toThrow('label printer offline');
    expect(await shipments(order)).toBe(0);
    expect((await box.run(order, { consumer: 'Shipping', transactional: true }, record(order))).duplicate).toBe(false);
    expect(await shipments(order)).toBe(1);
  });

  it('COMMIT refused (serialization failure): nothing written, not-committed, and the key is free at once', async () => {
    const { inbox: box, tx } = await inbox();
    const order = key();
    tx.beforeCommit = () => {
      throw Object.assign(new Error('could not serialize access'), { code: '40001' });
    };
    expect(await box.run(order, { consumer: 'Shipping', transactional: true }, record(order)).catch(codeOf)).toBe(
      'not-committed',
    );
    expect(await shipments(order)).toBe(0);
    expect((await box.run(order, { consumer: 'Shipping', transactional: true }, record(order))).duplicate).toBe(false);
    expect(logs.errors).toHaveBeenCalledWith(expect.stringContaining('Shipping: the transaction was rolled back'));
  });

  it('COMMIT lost with its connection (it may have landed): not-committed, and the key is kept, never run twice meanwhile', async () => {
    const { inbox: box, tx } = await inbox();
    const order = key();
    tx.beforeCommit = async (client) => {
      await pool.query('SELECT pg_terminate_backend($1)', [(client as unknown as { processID: number }).processID]);
    };
    expect(await box.run(order, { consumer: 'Shipping', transactional: true }, record(order)).catch(codeOf)).toBe(
      'not-committed',
    );
    expect(await box.run(order, { consumer: 'Shipping', transactional: true }, record(order)).catch(codeOf)).toBe(
      'key-in-flight',
    );
    expect(await shipments(order)).toBe(0);
  });

  it('a transaction that cannot be opened: store-unavailable, the work not run, the key free', async () => {
    const broken = new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none', connectionTimeoutMillis: 2_000 });
    broken.on('error', () => undefined);
    const { inbox: box } = await inbox(new PgTransactions(broken));
    const order = key();
    let ran = 0;
    const counted = () => void ran++;
    expect(await box.run(order, { consumer: 'Shipping', transactional: true }, counted).catch(codeOf)).toBe('store-unavailable');
    expect(ran).toBe(0);
    await broken.end();
    const { inbox: working } = await inbox();
    expect((await working.run(order, { consumer: 'Shipping', transactional: true }, record(order))).duplicate).toBe(false);
  });

  it('work that swallowed an SQL error (aborted transaction): transaction-aborted, nothing written, the key free', async () => {
    const { inbox: box } = await inbox();
    const order = key();
    const swallowing = async (sql: SqlExecutor | undefined) => {
      await record(order)(sql);
      await sql!.query('SELECT 1 / 0', []).catch(() => undefined);
      return 'done';
    };
    expect(await box.run(order, { consumer: 'Shipping', transactional: true }, swallowing).catch(codeOf)).toBe(
      'transaction-aborted',
    );
    expect(await shipments(order)).toBe(0);
    expect((await box.run(order, { consumer: 'Shipping', transactional: true }, record(order))).duplicate).toBe(false);
  });

  it('work that outlives transactionTimeoutMs is rolled back: its completion finds the lease over', async () => {
    const { inbox: box } = await inbox(undefined, 200);
    const order = key();
    const slow = async (sql: SqlExecutor | undefined) => {
      const done = await record(order)(sql);
      await sleep(400);
      return done;
    };
    const late = await box.run(order, { consumer: 'Shipping', transactional: true }, slow).catch((err: unknown) => err);
    expect(late).toMatchObject({
      code: 'transaction-timed-out',
      message:
        'the request ran past its transaction timeout and was rolled back; another request with this key may be running, retry shortly',
    });
    expect(await shipments(order)).toBe(0);
    expect(logs.warnings).toHaveBeenCalledWith(expect.stringContaining('Shipping: the transactional request ran past'));
  });

  it('needs the transactions option', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ store: new PostgresStore({ pool, sweepIntervalMs: 0 }) })],
    }).compile();
    const app = await moduleRef.createNestApplication({ logger: false }).init();
    apps.push(app);
    await expect(app.get(IdempotencyInbox).run(key(), { consumer: 'Shipping', transactional: true }, () => 1)).rejects.toThrow(
      'IdempotencyInbox.run(): transactional: true needs the module option transactions',
    );
  });
});
