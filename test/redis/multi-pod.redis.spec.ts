import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pay, Pod, pooled } from '../support/pod.js';
import { RedisServer, redisAvailable } from '../support/redis-server.js';
import { sleep } from '../support/timing.js';
import { built } from '../support/build.js';

built('.build');

const describeRedis = redisAvailable('multi-pod suite') ? describe : describe.skip;

describeRedis('two sample pods (separate processes, Express and Fastify) on one Redis', () => {
  let server: RedisServer;
  let dir: string;
  let database: string;
  let pods: Pod[] = [];
  const rows = (key: string): number =>
    (
      new Database(database, { readonly: true })
        .prepare('SELECT COUNT(*) AS n FROM payments WHERE idempotency_key = ?')
        .get(key) as { n: number }
    ).n;

  beforeAll(async () => {
    server = await RedisServer.start();
    dir = mkdtempSync(join(tmpdir(), 'idem-pods-'));
    database = join(dir, 'payments.db');
    pods = [
      await Pod.start({ redisUrl: server.url, database, adapter: 'express' }),
      await Pod.start({ redisUrl: server.url, database, adapter: 'fastify' }),
    ];
  }, 60_000);
  afterAll(async () => {
    await Promise.all(pods.map((p) => p.kill()));
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a retry on pod 2 replays pod 1's response byte for byte", async () => {
    const first = await pay(pods[0].base, 'cross-pod');
    const retry = await pay(pods[1].base, 'cross-pod');
    expect(first.status).toBe(201);
    expect(retry).toEqual({ status: 201, text: first.text, replayed: true });
    expect(rows('cross-pod')).toBe(1);
  });

  it('200 concurrent same-key requests over both pods: one handler run, every other answer 409 or the replay', async () => {
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => pay(pods[i % 2].base, 'stampede')));
    const firsts = answers.filter((a) => a.status === 201 && !a.replayed);
    expect(firsts).toHaveLength(1);
    for (const a of answers) {
      if (a === firsts[0]) continue;
      if (a.status === 409) expect(a.text).toBe('{"error":"idempotency-key in-flight; retry shortly"}');
      else expect(a).toEqual({ status: 201, text: firsts[0].text, replayed: true });
    }
    expect(rows('stampede')).toBe(1);
  });

  it('2,000 distinct keys across both pods: each handler once, every replay identical', async () => {
    const keys = Array.from({ length: 2000 }, (_, i) => `bulk-${i}`);
    const firsts = await pooled(
      32,
      keys.map((k, i) => () => pay(pods[i % 2].base, k, { amount: i + 1, currency: 'EUR' })),
    );
    const replays = await pooled(
      32,
      keys.map((k, i) => () => pay(pods[(i + 1) % 2].base, k, { amount: i + 1, currency: 'EUR' })),
    );
    firsts.forEach((f, i) => {
      expect(f.status).toBe(201);
      expect(replays[i]).toEqual({ status: 201, text: f.text, replayed: true });
    });
    const db = new Database(database, { readonly: true });
    const counts = db
      .prepare("SELECT COUNT(*) AS n, COUNT(DISTINCT idempotency_key) AS k FROM payments WHERE idempotency_key LIKE 'bulk-%'")
      .get() as { n: number; k: number };
    db.close();
    expect(counts).toEqual({ n: 2000, k: 2000 });
    // 4,000 requests through two processes: seconds alone, more on two cores shared with another job.
  }, 120_000);
});

describeRedis('pod crash and lease renewal', () => {
  let server: RedisServer;
  let dir: string;
  const lease = 600;
  beforeAll(async () => {
    server = await RedisServer.start();
    dir = mkdtempSync(join(tmpdir(), 'idem-crash-'));
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const claimKey = (key: string) => `idem:acct_alice:${key}`;

  it('a pod killed mid-handler leaves a claim that expires within one lease; the retry then runs', async () => {
    const database = join(dir, 'crash.db');
    const slow = await Pod.start({ redisUrl: server.url, database, leaseMs: lease, providerLatencyMs: 30_000 });
    const healthy = await Pod.start({ redisUrl: server.url, database, leaseMs: lease });
    try {
      void pay(slow.base, 'crash').catch(() => undefined);
      for (let i = 0; i < 100 && server.cli('EXISTS', claimKey('crash')).trim() !== '1'; i++) await sleep(20);
      await slow.kill();
      expect((await pay(healthy.base, 'crash')).status).toBe(409);
      // Nobody renews the dead pod's claim: it has at most one lease left.
      expect(Number(server.cli('PTTL', claimKey('crash')))).toBeLessThanOrEqual(lease);
      let retry = await pay(healthy.base, 'crash');
      for (let i = 0; i < 100 && retry.status === 409; i++) {
        await sleep(50);
        retry = await pay(healthy.base, 'crash');
      }
      expect(retry.status).toBe(201);
      expect(retry.replayed).toBe(false);
    } finally {
      await Promise.all([slow.kill(), healthy.kill()]);
    }
  }, 30_000);

  it('a handler slower than the lease keeps its claim (renewal) and its response is replayed', async () => {
    const database = join(dir, 'renew.db');
    const slow = await Pod.start({ redisUrl: server.url, database, leaseMs: lease, providerLatencyMs: lease * 3 });
    const other = await Pod.start({ redisUrl: server.url, database, leaseMs: lease });
    try {
      const first = pay(slow.base, 'renewed');
      await sleep(lease * 2);
      expect((await pay(other.base, 'renewed')).status).toBe(409);
      const done = await first;
      expect(done.status).toBe(201);
      expect(await pay(other.base, 'renewed')).toEqual({ status: 201, text: done.text, replayed: true });
    } finally {
      await Promise.all([slow.kill(), other.kill()]);
    }
  }, 30_000);
});
