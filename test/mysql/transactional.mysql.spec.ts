import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Inject, type INestApplicationContext, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import mysql from 'mysql2/promise';
import {
  IdempotencyInbox,
  IdempotencyKey,
  IdempotencyModule,
  type IdempotencyModuleOptions,
  Idempotent,
  MySqlStore,
} from '../../lib/index.js';
import type { SqlExecutor } from '../../lib/stores/index.js';
import { ADAPTERS, type AdapterName, listen, useApps } from '../support/app.js';
import { spyOnLogger } from '../support/logger.js';
import { MySqlServer, mysqlAvailable } from '../support/mysql-server.js';
import { MySqlTransactions } from '../support/mysql-transactions.js';
import { sleep } from '../support/timing.js';

const describeMy = mysqlAvailable('transactional MySQL suite') ? describe : describe.skip;

let server: MySqlServer;
let pool: mysql.Pool;

/** What the next handler run does. */
const behaviour = { failOnce: false, delayMs: 0 };

@Controller('charges')
class ChargesController {
  constructor(@Inject(MySqlTransactions) private readonly tx: MySqlTransactions) {}

  // The handler writes through the transaction the module opened, as a @Transactional() service would.
  @Post()
  @Idempotent({ transactional: true })
  async create(@Body() body: { amount: number }, @IdempotencyKey() key: string): Promise<object> {
    const [result] = (await this.tx.connection.query('INSERT INTO charges (`key`, amount) VALUES (?, ?)', [
      key,
      body.amount,
    ])) as [{ insertId: number }, unknown];
    if (behaviour.delayMs) await sleep(behaviour.delayMs);
    if (behaviour.failOnce) {
      behaviour.failOnce = false;
      throw new Error('declined after the INSERT');
    }
    return { id: `ch_${result.insertId}`, amount: body.amount };
  }
}

@Controller('rides')
class RidesController {
  @Post()
  @Idempotent({ atomicPhases: true })
  book(): object {
    return {};
  }
}

const rows = async (key: string): Promise<number> =>
  Number(((await pool.query('SELECT count(*) AS n FROM charges WHERE `key` = ?', [key]))[0] as { n: number }[])[0].n);

async function charge(base: string, key: string): Promise<{ status: number; text: string; replayed: boolean }> {
  const res = await fetch(`${base}/charges`, {
    method: 'POST',
    headers: { 'idempotency-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ amount: 100 }),
  });
  return { status: res.status, text: await res.text(), replayed: res.headers.get('idempotent-replayed') === 'true' };
}

describeMy('transactional: true on MySQL, with a plain mysql2 transactions port', () => {
  const start = useApps();
  spyOnLogger();

  beforeAll(async () => {
    server = await MySqlServer.start();
    const url = await server.createDatabase(`transactional_${process.pid}`);
    pool = mysql.createPool({ uri: url, connectionLimit: 10 });
    await pool.query(
      'CREATE TABLE charges (id INT AUTO_INCREMENT PRIMARY KEY, `key` VARCHAR(255) NOT NULL, amount INT NOT NULL)',
    );
    await pool.query('CREATE TABLE shipments (id INT AUTO_INCREMENT PRIMARY KEY, order_id VARCHAR(255) NOT NULL)');
  }, 120_000);
  afterAll(async () => {
    await pool?.end();
    await server?.destroy();
  });

  async function app(adapter: AdapterName, options: IdempotencyModuleOptions = {}) {
    const tx = new MySqlTransactions(pool);
    const nest = await start(adapter, {
      imports: [IdempotencyModule.forRoot({ store: new MySqlStore({ pool, sweepIntervalMs: 0 }), transactions: tx, ...options })],
      controllers: [ChargesController],
      providers: [{ provide: MySqlTransactions, useValue: tx }],
    });
    return { base: await listen(nest), tx };
  }

  describe.each(ADAPTERS)('%s', (adapter) => {
    const key = (name: string) => `${adapter}-${name}`;

    it('ten retries: one row, nine byte-identical replays', async () => {
      const { base } = await app(adapter);
      const first = await charge(base, key('ten'));
      expect(first).toMatchObject({ status: 201, replayed: false });
      for (let i = 0; i < 9; i++) expect(await charge(base, key('ten'))).toEqual({ ...first, replayed: true });
      expect(await rows(key('ten'))).toBe(1);
    });

    it('the handler throws after its INSERT: rolled back, its error goes out, and the retry runs and succeeds', async () => {
      const { base } = await app(adapter);
      behaviour.failOnce = true;
      expect((await charge(base, key('throws'))).status).toBe(500);
      expect(await rows(key('throws'))).toBe(0);
      expect(await charge(base, key('throws'))).toMatchObject({ status: 201, replayed: false });
      expect(await rows(key('throws'))).toBe(1);
    });

    it('the connection dies before COMMIT: 503, the key kept until its lease ends, then exactly one run', async () => {
      const { base, tx } = await app(adapter, { transactionTimeoutMs: 1000 });
      tx.beforeCommit = async (connection) => {
        await pool.query(`KILL ${Number(connection.threadId)}`);
        await sleep(50);
      };
      expect((await charge(base, key('lost'))).status).toBe(503);
      expect(await rows(key('lost'))).toBe(0);
      // The outcome of COMMIT is unknown to the module: the key stays held until its lease ends.
      expect((await charge(base, key('lost'))).status).toBe(409);
      await sleep(1100);
      expect(await charge(base, key('lost'))).toMatchObject({ status: 201, replayed: false });
      expect(await rows(key('lost'))).toBe(1);
    });
  });

  it('the inbox commits its record with the work: one shipment, a redelivery gets its result, a failure writes nothing', async () => {
    const tx = new MySqlTransactions(pool);
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ store: new MySqlStore({ pool, sweepIntervalMs: 0 }), transactions: tx })],
    }).compile();
    const nest: INestApplicationContext = await moduleRef.createNestApplication({ logger: false }).init();
    try {
      const box = nest.get(IdempotencyInbox);
      const ship =
        (order: string, fail = false) =>
        async (sql: SqlExecutor | undefined) => {
          await sql!.query('INSERT INTO shipments (order_id) VALUES (?)', [order]);
          if (fail) throw new Error('carrier down');
          return { shipped: order };
        };
      const shipments = async (order: string) =>
        Number(
          ((await pool.query('SELECT count(*) AS n FROM shipments WHERE order_id = ?', [order]))[0] as { n: number }[])[0].n,
        );
      await expect(box.run('order-1', { consumer: 'Shipping', transactional: true }, ship('order-1', true))).rejects.toThrow(
        'carrier down',
      );
      expect(await shipments('order-1')).toBe(0);
      const first = await box.run('order-1', { consumer: 'Shipping', transactional: true }, ship('order-1'));
      expect(first).toEqual({ value: { shipped: 'order-1' }, duplicate: false });
      expect(await box.run('order-1', { consumer: 'Shipping', transactional: true }, ship('order-1'))).toEqual({
        value: { shipped: 'order-1' },
        duplicate: true,
      });
      expect(await shipments('order-1')).toBe(1);
    } finally {
      await nest.close();
    }
  });

  it('an atomicPhases route on MySqlStore is refused at startup, saying which store keeps recovery points', async () => {
    await expect(
      start('express', {
        imports: [
          IdempotencyModule.forRoot({
            store: new MySqlStore({ pool, sweepIntervalMs: 0 }),
            transactions: new MySqlTransactions(pool),
          }),
        ],
        controllers: [RidesController],
      }),
    ).rejects.toThrow(
      "atomicPhases: true needs a store that commits its record in your transaction and keeps recovery points: store: new PostgresStore(...) on your application's database (MySqlStore has no recovery points)",
    );
  });
});
