import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { built } from '../support/build.js';
import { type Answer, pay, Pod } from '../support/pod.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { RedisServer, redisAvailable } from '../support/redis-server.js';
import { sleep } from '../support/timing.js';

built('.build');

const stores = [
  ...(redisAvailable('graceful shutdown suite') ? (['redis'] as const) : []),
  ...(postgresAvailable('graceful shutdown suite') ? (['postgres'] as const) : []),
];
const cases = stores.flatMap((store) =>
  (['express', 'fastify'] as const).flatMap((adapter) => [false, true].map((force) => [store, adapter, force] as const)),
);

// H19 (issue 22 item 4): Nest's close() runs onModuleDestroy before the HTTP server drains; the
// renewer stopped there, and the store closed without waiting. A handler slower than the lease then
// lost its key to a retry on another pod, or could not commit. Two pods of the sample, one store,
// the payments of both in one SQLite file: a row per handler run.
describe.each(cases)('SIGTERM during a handler on %s, %s, forceCloseConnections %s', (store, adapter, force) => {
  let redis: RedisServer | undefined;
  let postgres: PostgresServer | undefined;
  let dir: string;
  let database: string;
  const pods: Pod[] = [];
  const rows = (key: string): number => {
    const db = new Database(database, { readonly: true });
    try {
      return (db.prepare('SELECT COUNT(*) AS n FROM payments WHERE idempotency_key = ?').get(key) as { n: number }).n;
    } finally {
      db.close();
    }
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'idem-shutdown-'));
    database = join(dir, 'payments.db');
    const target =
      store === 'redis'
        ? { redisUrl: (redis = await RedisServer.start()).url }
        : { postgresUrl: await (postgres = await PostgresServer.start()).createDatabase(`shutdown_${adapter}_${force}`) };
    const common = { store, database, adapter, leaseMs: 1_500, ...target } as const;
    pods.push(
      // Pod A: a handler of 4 s, longer than two leases; pod B answers the retries.
      await Pod.start({ ...common, providerLatencyMs: 4_000, env: { FORCE_CLOSE_CONNECTIONS: force ? '1' : '0' } }),
      await Pod.start(common),
    );
  }, 90_000);
  afterAll(async () => {
    await Promise.all(pods.map((p) => p.kill()));
    await redis?.stop();
    await postgres?.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the handler finishes and commits; retries on the other pod get 409, then the replay; never a second run', async () => {
    const [a, b] = pods;
    const key = `deploy-${store}-${adapter}-${force}`;
    const first = pay(a.base, key).catch((err: Error) => err);
    await sleep(500);
    const exited = a.terminate();
    // Retries on pod B while A shuts down: at most 60, every 200 ms, until one is a replay.
    const answers: Answer[] = [];
    for (let i = 0; i < 60; i++) {
      const answer = await pay(b.base, key);
      answers.push(answer);
      if (answer.status !== 409) break;
      await sleep(200);
    }
    const last = answers.at(-1)!;
    expect(answers.slice(0, -1).every((x) => x.status === 409)).toBe(true);
    expect(last).toMatchObject({ status: 201, replayed: true });
    expect(rows(key)).toBe(1);
    expect(await exited).toBe('SIGTERM');
    const original = await first;
    // With forceCloseConnections the shutdown may have ended the connection first: that client's
    // retry gets the replay, as pod B's did. Otherwise the first client has its 201.
    if (!(force && original instanceof Error)) {
      expect(original).toMatchObject({ status: 201, text: last.text, replayed: false });
    }
    expect(a.output.join('')).not.toMatch(/lease lost|not stored|Connection is closed/);
  }, 60_000);
});
