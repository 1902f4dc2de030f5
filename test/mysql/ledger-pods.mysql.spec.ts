import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { built } from '../support/build.js';
import { MySqlServer, mysqlAvailable } from '../support/mysql-server.js';
import { charge, crashed, retryUntilSettled } from '../support/ledger-client.js';
import { Pod, type PodOptions, pooled } from '../support/pod.js';
import { sleep } from '../support/timing.js';

built('.build');

const describeMy = mysqlAvailable('ledger pods suite on MySQL') ? describe : describe.skip;

// The ledger sample on MySQL (TypeORM's mysql driver, @nestjs-cls/transactional, MySqlStore and
// @Idempotent({ transactional: true })) in processes of their own, on a MariaDB server of the
// suite's own: it is stopped and started again. Pods alternate between Express and Fastify.

let server: MySqlServer;
let databases = 0;

describeMy('the ledger sample: exactly-once with MySQL across processes', () => {
  let url: string;
  const pods: Pod[] = [];
  const start = async (over: Partial<PodOptions> = {}): Promise<Pod> => {
    const pod = await Pod.start({ sample: 'ledger', store: 'mysql', mysqlUrl: url, ...over });
    pods.push(pod);
    return pod;
  };
  const rows = async (key: string): Promise<number> =>
    Number((await server.query<{ n: number }>('SELECT count(*) AS n FROM charges WHERE idempotency_key = ?', [key], url))[0].n);
  /** Until the handler has written its (uncommitted) charge: its transaction has modified a row. */
  const untilInserted = async (): Promise<void> => {
    for (let i = 0; i < 100; i++) {
      const [{ n }] = await server.query<{ n: number }>(
        'SELECT count(*) AS n FROM information_schema.INNODB_TRX WHERE trx_rows_modified > 0',
        [],
        url,
      );
      if (Number(n) > 0) return;
      // Not faster: looking every 25 ms (a new connection each time) kept the handler's INSERT from showing at all (not traced).
      await sleep(200);
    }
    throw new Error('the handler never wrote its charge');
  };

  beforeAll(async () => {
    server = await MySqlServer.start({ ownServer: true });
  }, 120_000);
  beforeEach(async () => {
    url = await server.createDatabase(`ledger_${process.pid}_${++databases}`);
  });
  afterEach(async () => {
    await Promise.all(pods.splice(0).map((p) => p.kill()));
  });
  afterAll(async () => {
    await server?.destroy();
  });

  it('ten retries: one charge, nine byte-identical replays, on both adapters', async () => {
    for (const adapter of ['express', 'fastify'] as const) {
      const pod = await start({ adapter });
      const key = `ten-${adapter}`;
      const first = await charge(pod.base, key);
      expect(first).toMatchObject({ status: 201, replayed: false });
      for (let i = 0; i < 9; i++) expect(await charge(pod.base, key)).toEqual({ ...first, replayed: true });
      expect(await rows(key)).toBe(1);
    }
  }, 90_000);

  it('200 requests with one key over two processes: one charge, only 201, 409 and replays', async () => {
    const [express, fastify] = [await start(), await start({ adapter: 'fastify', providerLatencyMs: 20 })];
    const answers = await pooled(
      20,
      Array.from({ length: 200 }, (_, i) => () => charge((i % 2 ? fastify : express).base, 'stampede')),
    );
    const firsts = answers.filter((a) => a.status === 201 && !a.replayed);
    expect(firsts).toHaveLength(1);
    expect(answers.every((a) => a.status === 409 || (a.status === 201 && a.text === firsts[0].text))).toBe(true);
    expect(await rows('stampede')).toBe(1);
  }, 90_000);

  it('SIGKILL after the INSERT, before COMMIT: no charge; 409 until the lease ends, then exactly one run', async () => {
    const lease = { env: { TRANSACTION_TIMEOUT_MS: '1500' } };
    const doomed = await start({ ...lease, providerLatencyMs: 30_000 });
    const healthy = await start({ ...lease, adapter: 'fastify' });
    const lost = crashed(charge(doomed.base, 'sigkill'));
    await untilInserted();
    await doomed.kill();
    expect(await lost).toBe('connection lost');
    expect(await rows('sigkill')).toBe(0);
    expect((await charge(healthy.base, 'sigkill')).status).toBe(409);
    expect(await retryUntilSettled(healthy.base, 'sigkill')).toMatchObject({ status: 201, replayed: false });
    expect(await rows('sigkill')).toBe(1);
  }, 90_000);

  it('killed after COMMIT, before the response: the retry is a byte-identical replay, still one charge', async () => {
    const doomed = await start({ env: { FAULT: 'after-commit' } });
    expect(await crashed(charge(doomed.base, 'after-commit'))).toBe('connection lost');
    expect(await rows('after-commit')).toBe(1);
    const healthy = await start({ adapter: 'fastify' });
    const replay = await charge(healthy.base, 'after-commit');
    expect(replay).toMatchObject({ status: 201, replayed: true });
    expect(await charge(healthy.base, 'after-commit')).toEqual(replay);
    const [stored] = await server.query<{ id: number }>(
      'SELECT id FROM charges WHERE idempotency_key = ?',
      ['after-commit'],
      url,
    );
    expect(JSON.parse(replay.text)).toMatchObject({ id: `ch_${stored.id}`, amount: 100 });
    expect(await rows('after-commit')).toBe(1);
  }, 90_000);

  it('a handler slower than its lease, taken over by another process: its transaction rolls back, one charge', async () => {
    const lease = { env: { TRANSACTION_TIMEOUT_MS: '800' } };
    const slow = await start({ ...lease, providerLatencyMs: 2000 });
    const fast = await start({ ...lease, adapter: 'fastify' });
    const late = charge(slow.base, 'takeover');
    await untilInserted();
    await sleep(900);
    const second = await charge(fast.base, 'takeover');
    expect(second).toMatchObject({ status: 201, replayed: false });
    const first = await late;
    expect(first.status).toBe(409);
    expect(await rows('takeover')).toBe(1);
    expect(await charge(slow.base, 'takeover')).toEqual({ ...second, replayed: true });
  }, 90_000);

  it("the transaction's connection killed mid-handler: 5xx, the key freed or kept to its lease, then exactly one charge", async () => {
    const pod = await start({ providerLatencyMs: 1000, env: { TRANSACTION_TIMEOUT_MS: '2000' } });
    const during = charge(pod.base, 'killed-connection');
    await untilInserted();
    const [trx] = await server.query<{ id: number }>(
      'SELECT trx_mysql_thread_id AS id FROM information_schema.INNODB_TRX WHERE trx_rows_modified > 0',
      [],
      url,
    );
    await server.query(`KILL ${Number(trx.id)}`);
    expect((await during).status).toBeGreaterThanOrEqual(500);
    expect(await rows('killed-connection')).toBe(0);
    const after = await retryUntilSettled(pod.base, 'killed-connection');
    expect(after).toMatchObject({ status: 201, replayed: false });
    expect(await rows('killed-connection')).toBe(1);
  }, 90_000);

  it('MariaDB stopped mid-handler: a 5xx now; started again, a retry replays or runs once, never two charges', async () => {
    const pod = await start({ providerLatencyMs: 1000, env: { TRANSACTION_TIMEOUT_MS: '2000' } });
    const during = charge(pod.base, 'outage');
    await untilInserted();
    await server.stop();
    const now = await during;
    expect(now.status).toBeGreaterThanOrEqual(500);
    await server.resume();
    const after = await retryUntilSettled(pod.base, 'outage');
    expect(after.status).toBe(201);
    expect(await rows('outage')).toBe(1);
    expect(await charge(pod.base, 'outage')).toEqual({ ...after, replayed: true });
  }, 90_000);
});
