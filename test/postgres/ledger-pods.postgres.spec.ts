import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { built } from '../support/build.js';
import { charge, crashed, retryUntilSettled } from '../support/ledger-client.js';
import { ledgerScenarios } from '../support/ledger-scenarios.js';
import { Pod, type PodOptions } from '../support/pod.js';
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

  ledgerScenarios({
    name: 'PostgreSQL',
    start,
    rows,
    chargeId: async (key) =>
      (await server.query<{ id: number }>('SELECT id FROM charges WHERE idempotency_key = $1', [key], url))[0].id,
    untilInserted,
    stopServer: () => server.stop(),
    resumeServer: () => server.resume(),
    // One xmin: the charge and the record were written by one transaction.
    sameTransaction: async (key) =>
      (
        await server.query<{ same: boolean }>(
          `SELECT c.xmin = r.xmin AS same FROM charges c, idempotency_records r
           WHERE c.idempotency_key = $1 AND r.key LIKE '%:' || $1`,
          [key],
          url,
        )
      )[0].same,
  });

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
});
