import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { built } from '../support/build.js';
import { pay, Pod } from '../support/pod.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { sleep } from '../support/timing.js';

built('.build');

// "A pod killed mid-handler" is drawn in docs/guides/flows.md ("A pod dies mid-handler: the lease").
const describePg = postgresAvailable('PostgreSQL multi-pod suite') ? describe : describe.skip;

// Sample pods in processes of their own on one PostgreSQL server of the suite's own (it is stopped
// and started again), with their payments in one shared SQLite file.
describePg('sample pods on one PostgreSQL', () => {
  let server: PostgresServer;
  let dir: string;
  let database: string;
  let url: string;
  const lease = 600;
  const rows = (key: string): number => {
    const db = new Database(database, { readonly: true });
    const { n } = db.prepare('SELECT COUNT(*) AS n FROM payments WHERE idempotency_key = ?').get(key) as { n: number };
    db.close();
    return n;
  };
  const start = (over: Partial<Parameters<typeof Pod.start>[0]> = {}) =>
    Pod.start({ store: 'postgres', postgresUrl: url, database, leaseMs: lease, ...over });

  beforeAll(async () => {
    server = await PostgresServer.start({ ownServer: true });
    url = server.url;
    dir = mkdtempSync(join(tmpdir(), 'idem-pg-pods-'));
    database = join(dir, 'payments.db');
  }, 60_000);
  afterAll(async () => {
    await server?.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a retry on pod 2 replays pod 1's response; 100 concurrent requests run the handler once", async () => {
    const pods = [await start(), await start({ adapter: 'fastify' })];
    try {
      const first = await pay(pods[0].base, 'cross-pod');
      expect(first.status).toBe(201);
      expect(await pay(pods[1].base, 'cross-pod')).toEqual({ status: 201, text: first.text, replayed: true });
      const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => pay(pods[i % 2].base, 'stampede')));
      expect(answers.filter((a) => a.status === 201 && !a.replayed)).toHaveLength(1);
      expect(answers.every((a) => a.status === 201 || a.status === 409)).toBe(true);
      expect(rows('stampede')).toBe(1);
    } finally {
      await Promise.all(pods.map((p) => p.kill()));
    }
  }, 60_000);

  it('a pod killed mid-handler: retries get 409 until its lease ends, then the handler runs once', async () => {
    const slow = await start({ providerLatencyMs: 30_000 });
    const healthy = await start();
    try {
      void pay(slow.base, 'crash').catch(() => undefined);
      const held = async () =>
        (
          await server.query<{ n: string }>("SELECT count(*) AS n FROM idempotency_records WHERE key = 'idem:acct_alice:crash'")
        )[0].n === '1';
      for (let i = 0; i < 100 && !(await held()); i++) await sleep(20);
      await slow.kill();
      expect((await pay(healthy.base, 'crash')).status).toBe(409);
      let retry = await pay(healthy.base, 'crash');
      for (let i = 0; i < 100 && retry.status === 409; i++) {
        await sleep(50);
        retry = await pay(healthy.base, 'crash');
      }
      expect(retry).toMatchObject({ status: 201, replayed: false });
      expect(rows('crash')).toBe(1);
    } finally {
      await Promise.all([slow.kill(), healthy.kill()]);
    }
  }, 60_000);

  it('PostgreSQL stopped mid-run: 503 and no handler runs; started again: requests succeed without a restart', async () => {
    const pod = await start();
    try {
      expect((await pay(pod.base, 'before-outage')).status).toBe(201);
      await server.stop();
      const down = await pay(pod.base, 'during-outage');
      expect(down.status).toBe(503);
      expect(down.text).toBe('{"error":"idempotency store unavailable; retry shortly"}');
      expect(rows('during-outage')).toBe(0);
      await server.resume();
      let after = await pay(pod.base, 'during-outage');
      for (let i = 0; i < 50 && after.status === 503; i++) {
        await sleep(100);
        after = await pay(pod.base, 'during-outage');
      }
      expect(after).toMatchObject({ status: 201, replayed: false });
      expect(rows('during-outage')).toBe(1);
    } finally {
      await pod.kill();
    }
  }, 60_000);
});
