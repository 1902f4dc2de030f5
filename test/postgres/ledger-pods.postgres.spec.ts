import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { built } from '../support/build.js';
import { charge, crashed, retryUntilSettled } from '../support/ledger-client.js';
import { Pod, type PodOptions, pooled } from '../support/pod.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { redisAvailable, RedisServer } from '../support/redis-server.js';
import { sleep } from '../support/timing.js';

built('.build');

const describePg = postgresAvailable('ledger pods suite') ? describe : describe.skip;
const itRedis = redisAvailable('ledger pods suite, the RedisStore contrast') ? it : it.skip;

// The ledger sample (sample/ledger/: TypeORM, @nestjs-cls/transactional, PostgresStore and
// @Idempotent({ transactional: true })) in processes of their own, on a PostgreSQL server of the
// suite's own: it is stopped and started again. Pods alternate between Express and Fastify.

let server: PostgresServer;
let databases = 0;

describePg('the ledger sample: exactly-once with PostgreSQL across processes', () => {
  let url: string;
  const pods: Pod[] = [];
  const start = async (over: Partial<PodOptions> = {}): Promise<Pod> => {
    const pod = await Pod.start({ sample: 'ledger', store: 'postgres', postgresUrl: url, ...over });
    pods.push(pod);
    return pod;
  };
  const rows = async (key: string): Promise<number> =>
    (await server.query<{ n: number }>('SELECT count(*)::int AS n FROM charges WHERE idempotency_key = $1', [key], url))[0].n;
  /** Until the handler has written its (uncommitted) charge: its transaction holds a row lock on charges. */
  const untilInserted = async (): Promise<void> => {
    for (let i = 0; i < 200; i++) {
      const [{ n }] = await server.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
         WHERE c.relname = 'charges' AND l.mode = 'RowExclusiveLock'`,
        [],
        url,
      );
      if (n > 0) return;
      await sleep(25);
    }
    throw new Error('the handler never wrote its charge');
  };

  beforeAll(async () => {
    server = await PostgresServer.start({ ownServer: true });
  }, 60_000);
  beforeEach(async () => {
    url = await server.createDatabase(`ledger_${process.pid}_${++databases}`);
  });
  afterEach(async () => {
    await Promise.all(pods.splice(0).map((p) => p.kill()));
  });
  afterAll(async () => {
    await server?.destroy();
  });

  it('ten retries: one charge, nine byte-identical replays; the charge and the record share one transaction', async () => {
    for (const adapter of ['express', 'fastify'] as const) {
      const pod = await start({ adapter });
      const key = `ten-${adapter}`;
      const first = await charge(pod.base, key);
      expect(first).toMatchObject({ status: 201, replayed: false });
      for (let i = 0; i < 9; i++) expect(await charge(pod.base, key)).toEqual({ ...first, replayed: true });
      expect(await rows(key)).toBe(1);
      // The trap this guards against: withTransaction(() => next.handle()) commits before the handler runs.
      const [{ same }] = await server.query<{ same: boolean }>(
        `SELECT c.xmin = r.xmin AS same FROM charges c, idempotency_records r
         WHERE c.idempotency_key = $1 AND r.key LIKE '%:' || $1`,
        [key],
        url,
      );
      expect(same).toBe(true);
    }
  }, 60_000);

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
  }, 60_000);

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
  }, 60_000);

  it('killed after COMMIT, before the response: the retry is a byte-identical replay, still one charge', async () => {
    const doomed = await start({ env: { FAULT: 'after-commit' } });
    expect(await crashed(charge(doomed.base, 'after-commit'))).toBe('connection lost');
    expect(await rows('after-commit')).toBe(1);
    const healthy = await start({ adapter: 'fastify' });
    const replay = await charge(healthy.base, 'after-commit');
    expect(replay).toMatchObject({ status: 201, replayed: true });
    expect(await charge(healthy.base, 'after-commit')).toEqual(replay);
    const [stored] = await server.query<{ id: number }>(
      'SELECT id FROM charges WHERE idempotency_key = $1',
      ['after-commit'],
      url,
    );
    expect(JSON.parse(replay.text)).toMatchObject({ id: `ch_${stored.id}`, amount: 100 });
    expect(await rows('after-commit')).toBe(1);
  }, 60_000);

  itRedis(
    'the contrast, documented: on RedisStore the same crash leaves a charge without a record, and the retry charges again',
    async () => {
      const redis = await RedisServer.start([], { ownServer: true });
      await redis.resume();
      try {
        const cached = { store: 'redis' as const, redisUrl: redis.url, leaseMs: 600 };
        const doomed = await start({ ...cached, env: { FAULT: 'after-commit' } });
        expect(await crashed(charge(doomed.base, 'contrast'))).toBe('connection lost');
        expect(await rows('contrast')).toBe(1);
        const healthy = await start({ ...cached, adapter: 'fastify' });
        // The claim outlives the crash by its lease; then the handler runs a second time.
        expect(await retryUntilSettled(healthy.base, 'contrast')).toMatchObject({ status: 201, replayed: false });
        expect(await rows('contrast')).toBe(2);
      } finally {
        await redis.stop();
      }
    },
    60_000,
  );

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
  }, 60_000);

  it('PostgreSQL stopped mid-handler: a 5xx now; started again, a retry replays or runs once, never two charges', async () => {
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
  }, 60_000);
});
