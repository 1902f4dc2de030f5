import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Controller, Inject, Logger, Post } from '@nestjs/common';
import pg from 'pg';
import { Idempotent, IdempotencyKey, IdempotencyModule, PostgresStore } from '../../lib/index.js';
import { DuplicateWaiters } from '../../lib/core/waiting/duplicate.waiters.js';
import { type AdapterName, listen, startApp } from '../support/app.js';
import { Gate } from '../support/fixtures.js';
import { PgTransactions } from '../support/pg-transactions.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { until } from '../support/timing.js';
import {
  LONG_WAIT_MS,
  manyWaiters,
  post,
  waitThroughRestart,
  startWaitPod,
  type WaitPod,
  waitingScenarios,
  waitKey,
} from '../support/waiting.js';

const describePg = postgresAvailable('waiting duplicates on PostgreSQL') ? describe : describe.skip;

@Controller('ledger')
class LedgerController {
  constructor(
    @Inject(PgTransactions) private readonly tx: PgTransactions,
    private readonly gate: Gate,
  ) {}

  /** Exactly-once: the charge row and the idempotency record commit together, or neither does. */
  @Post()
  @Idempotent({ transactional: true, inFlight: 'wait', waitMs: LONG_WAIT_MS })
  async charge(@IdempotencyKey() key: string) {
    await this.tx.client.query('INSERT INTO charges (key) VALUES ($1)', [key]);
    await this.gate.pass();
    return { charged: key };
  }
}

// Two applications (pods) on one database: the duplicate waits on the second, the first request runs
// on the first, and the wake-up travels through LISTEN/NOTIFY.
describePg("inFlight: 'wait' across two pods on PostgresStore", () => {
  let server: PostgresServer;
  let url: string;
  let first: WaitPod;
  let second: WaitPod;
  const named = (name: string) => {
    const named = new URL(url);
    named.searchParams.set('application_name', name);
    return new PostgresStore({ connectionString: named.toString() });
  };
  const backends = (name: string) =>
    server.query<{ query: string }>('SELECT query FROM pg_stat_activity WHERE application_name = $1', [name], url);

  beforeAll(async () => {
    server = await PostgresServer.start();
    url = await server.createDatabase(`waiting_${process.pid}`);
    first = await startWaitPod('express', named('first'));
    second = await startWaitPod('fastify', named('second'));
  });
  afterAll(async () => {
    await first?.app.close();
    await second?.app.close();
    await server?.destroy();
  });

  waitingScenarios(() => ({ first, second }));

  it('1 000 waiting duplicates cost one LISTEN connection and no pool connection; each gets the replay', async () => {
    await manyWaiters(first, second, 1_000, async () => {
      await until(async () => (await backends('second')).some((b) => b.query.startsWith('LISTEN')));
      const mine = await backends('second');
      expect(mine.filter((b) => b.query.startsWith('LISTEN'))).toHaveLength(1);
      // The store's pool (4 by default) and the listener: none per waiter.
      expect(mine.length).toBeLessThanOrEqual(4 + 1);
    });
  }, 120_000);

  it('a store closed while its listener connects leaves no LISTEN connection', async () => {
    const named = new URL(url);
    named.searchParams.set('application_name', 'closing');
    const store = new PostgresStore({ connectionString: named.toString() });
    const listening = store.listen(() => undefined);
    await store.close();
    await listening;
    await until(async () => (await backends('closing')).length === 0);
  });

  it('the listener comes back after its connection is killed: a later duplicate is woken again', async () => {
    await server.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'second' AND query LIKE 'LISTEN%'",
      [],
      url,
    );
    await until(async () => (await backends('second')).some((b) => b.query.startsWith('LISTEN')), 20_000);
    await manyWaiters(first, second, 1, async () => undefined);
  }, 60_000);

  // Issue 44 item 13: the LISTEN connection cut just before the settle; 40 waiters answered at waitMs.
  it('a settle notified while the listener is away is not lost: once it is back, the waiters look again', async () => {
    const key = waitKey();
    const { answer: original } = await first.gate.hold(() => post(first.base, '/wait/pay', key));
    const waiting = second.waiters.size;
    const duplicate = post(second.base, '/wait/pay', key);
    await until(() => second.waiters.size === waiting + 1, 20_000);
    const [killed] = await server.query<{ pid: number }>(
      "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'second' AND query LIKE 'LISTEN%'",
      [],
      url,
    );
    // Gone, and the listener opens its connection again only after a pause (500 ms) that starts now.
    const alive = () => server.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [killed.pid], url);
    await until(async () => (await alive()).length === 0, 20_000);
    // Settled and notified while nobody of the second pod listens.
    first.gate.release();
    const a = await original;
    const b = await duplicate;
    expect(b).toMatchObject({ status: 201, replayed: true, text: a.text });
    // Found when the listener came back, not by a look a lease (60 s) or LONG_WAIT_MS later.
    expect(b.at - a.at).toBeLessThan(20_000);
  }, 90_000);

  describe('on a transactional route, each pod with its own pg.Pool (the listener is made from its config)', () => {
    const ledgers: { base: string; gate: Gate; waiters: DuplicateWaiters; close: () => Promise<void> }[] = [];
    const start = async (adapter: AdapterName) => {
      const pool = new pg.Pool({ connectionString: url, max: 4 });
      const transactions = new PgTransactions(pool);
      const app = await startApp(adapter, {
        imports: [IdempotencyModule.forRoot({ store: new PostgresStore({ pool }), transactions })],
        controllers: [LedgerController],
        providers: [Gate, { provide: PgTransactions, useValue: transactions }],
      });
      const close = async () => {
        await app.close();
        await pool.end();
      };
      return { base: await listen(app), gate: app.get(Gate), waiters: app.get(DuplicateWaiters), close };
    };
    beforeAll(async () => {
      await server.query('CREATE TABLE charges (key text NOT NULL)', [], url);
      ledgers.push(await start('express'), await start('fastify'));
    });
    afterAll(() => Promise.all(ledgers.map((l) => l.close())));

    it('a duplicate on the other pod is woken when the transaction commits, and replays: one charge row', async () => {
      const [first, second] = ledgers;
      const key = waitKey();
      const { answer: original } = await first.gate.hold(() => post(first.base, '/ledger', key));
      const duplicate = post(second.base, '/ledger', key);
      await until(() => second.waiters.size === 1);
      first.gate.release();
      const [a, b] = await Promise.all([original, duplicate]);
      expect(a).toMatchObject({ status: 201, replayed: false });
      expect(b).toMatchObject({ status: 201, replayed: true, text: a.text });
      const [{ n }] = await server.query<{ n: string }>('SELECT count(*) AS n FROM charges WHERE key = $1', [key], url);
      expect(Number(n)).toBe(1);
    });
  });
});

describePg("inFlight: 'wait' while PostgreSQL restarts", () => {
  let server: PostgresServer;
  let first: WaitPod;
  let second: WaitPod;
  const listeners = async (name: string) =>
    (
      await server.query<{ n: string }>(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'",
        [name],
      )
    )[0].n;

  beforeAll(async () => {
    server = await PostgresServer.start({ ownServer: true });
    const url = await server.createDatabase('waiting_restart');
    const store = (name: string) => {
      const named = new URL(url);
      named.searchParams.set('application_name', name);
      return new PostgresStore({ connectionString: named.toString() });
    };
    first = await startWaitPod('fastify', store('first'));
    second = await startWaitPod('express', store('second'));
  });
  // A test that fails half-way leaves no handler held for the shutdown to wait on.
  afterEach(() => first?.gate.release());
  afterAll(async () => {
    await first?.app.close();
    await second?.app.close();
    await server?.destroy();
  });

  it('a duplicate waiting through the restart is woken once its LISTEN connection is back and the first is stored', async () => {
    await waitThroughRestart(first, second, {
      // Its LISTEN connection opens while the first waiter registers: awaited, not assumed.
      ready: async () => (await listeners('second')) === '1',
      restart: async () => {
        const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
        await server.stop();
        // Down long enough for the store's attempts to reopen the connection to fail, and be retried.
        await until(() => warn.mock.calls.some(([line]) => String(line).includes("the store's listener failed")), 30_000);
        warn.mockRestore();
        await server.resume();
      },
      // Opened again by the store, after a pause that doubles while the server is away.
      listening: async () => (await listeners('second')) === '1',
    });
  }, 90_000);
});
