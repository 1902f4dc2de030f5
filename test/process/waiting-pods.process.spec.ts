import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { built } from '../support/build.js';
import { type Answer, pay, Pod, type PodOptions } from '../support/pod.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { RedisServer, redisAvailable } from '../support/redis-server.js';
import { sleep } from '../support/timing.js';

built('.build');

// IDEMPOTENCY_IN_FLIGHT=wait on two sample pods, separate processes, one store: a client whose request
// to one pod is slow retries on the other, and gets the first one's answer instead of a 409.
const STORES = [
  ['Redis', redisAvailable('waiting duplicates across sample pods on Redis')],
  ['PostgreSQL', postgresAvailable('waiting duplicates across sample pods on PostgreSQL')],
] as const;

describe.each(STORES.filter(([, available]) => available).map(([name]) => name))(
  "inFlight: 'wait' across two sample pods on %s",
  (storeName) => {
    let redis: RedisServer | undefined;
    let postgres: PostgresServer | undefined;
    let dir: string;
    let database: string;
    let pods: Pod[] = [];
    let storeOptions: PodOptions;
    const store = (): PodOptions => storeOptions;
    const rows = (key: string): number =>
      (
        new Database(database, { readonly: true })
          .prepare('SELECT COUNT(*) AS n FROM payments WHERE idempotency_key = ?')
          .get(key) as { n: number }
      ).n;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'idem-wait-pods-'));
      database = join(dir, 'payments.db');
      if (storeName === 'Redis') {
        redis = await RedisServer.start();
        storeOptions = { store: 'redis', redisUrl: redis.url };
      } else {
        postgres = await PostgresServer.start();
        storeOptions = { store: 'postgres', postgresUrl: await postgres.createDatabase(`wait_pods_${process.pid}`) };
      }
      const options = { ...storeOptions, database, providerLatencyMs: 2_000, env: { IDEMPOTENCY_IN_FLIGHT: 'wait' } };
      pods = [await Pod.start({ ...options, adapter: 'express' }), await Pod.start({ ...options, adapter: 'fastify' })];
    }, 90_000);
    afterAll(async () => {
      await Promise.all(pods.map((p) => p.kill()));
      await redis?.stop();
      await postgres?.destroy();
      rmSync(dir, { recursive: true, force: true });
    });

    it('a duplicate sent to the other pod while the first runs gets its replay: one payment, no 409', async () => {
      const key = `wait-pods-${process.pid}`;
      let settled = false;
      const first = pay(pods[0].base, key).finally(() => (settled = true));
      // A client that gave up on a slow answer and retries on another pod, 0.3 s into a provider call of 2 s.
      await sleep(300);
      const sentWhileRunning = !settled;
      const duplicate = await pay(pods[1].base, key);
      const answers: Answer[] = [await first, duplicate];
      expect(sentWhileRunning).toBe(true);
      const ran = answers.filter((a) => a.status === 201 && !a.replayed);
      expect(ran).toHaveLength(1);
      // Which one ran depends on which pod claimed first; the other waited for it.
      expect(answers.filter((a) => a !== ran[0])).toEqual([{ status: 201, text: ran[0].text, replayed: true }]);
      expect(rows(key)).toBe(1);
    }, 60_000);

    // Issue 44 item 13: the owner SIGKILLed 0.7 s into its run; 40 duplicates waiting on the other pod
    // did nothing when its lease lapsed, then at waitMs one ran and 39 got 409.
    it('the owner killed mid-run: a waiter takes over once its lease lapses, the others wait for it; one payment, no 409', async () => {
      const waitMs = 30_000;
      const killed = { ...store(), database, providerLatencyMs: 2_000, leaseMs: 1_500 };
      const env = { IDEMPOTENCY_IN_FLIGHT: 'wait', IDEMPOTENCY_WAIT_MS: String(waitMs) };
      const [owner, other] = [await Pod.start({ ...killed, env }), await Pod.start({ ...killed, env, adapter: 'fastify' })];
      try {
        const key = `owner-killed-${process.pid}`;
        const first = pay(owner.base, key).catch(() => undefined);
        await sleep(300);
        const sent = Date.now();
        const duplicates = Array.from({ length: 40 }, () => pay(other.base, key));
        await sleep(400);
        await owner.kill();
        await first;
        const answers = await Promise.all(duplicates);
        const elapsed = Date.now() - sent;
        const ran = answers.filter((a) => a.status === 201 && !a.replayed);
        expect(ran).toHaveLength(1);
        expect(answers.filter((a) => a !== ran[0])).toEqual(
          Array.from({ length: 39 }, () => ({ status: 201, text: ran[0].text, replayed: true })),
        );
        expect(rows(key)).toBe(1);
        // Taken over about a lease after the kill, not found by the last look at waitMs.
        expect(elapsed).toBeLessThan(waitMs / 2);
      } finally {
        await Promise.all([owner.kill(), other.kill()]);
      }
    }, 90_000);
  },
);
