import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, type INestApplication, Post } from '@nestjs/common';
import { IdempotencyModule, Idempotent, InMemoryStore } from '../../lib/index.js';
import { ADAPTERS, listen, startApp } from '../support/app.js';
import { post } from '../support/pod.js';

const N = 200;

@Controller()
class FloodController {
  runs = 0;
  @Post('charge')
  @Idempotent()
  charge() {
    return { run: ++this.runs };
  }
}

/** Report lines for the stores guide's eviction notes: what the floods did to the stored records. */
const report: string[] = [];
afterAll(() => {
  if (report.length) process.stdout.write(`\neviction floods (maxEntries ${N}):\n${report.map((l) => `  ${l}`).join('\n')}\n`);
});

describe.each(ADAPTERS)('eviction floods on %s (bounded: 10 x maxEntries)', (adapter) => {
  let cache: InMemoryStore;
  let app: INestApplication;
  let quotaCache: InMemoryStore;
  let quotaApp: INestApplication;

  beforeAll(async () => {
    cache = new InMemoryStore({ maxEntries: N });
    app = await startApp(adapter, { imports: [IdempotencyModule.forRoot({ store: cache })], controllers: [FloodController] });
    quotaCache = new InMemoryStore({ maxEntries: N, prefixQuotas: { 'idem:': N / 2, 'rl:': N / 2 } });
    quotaApp = await startApp(adapter, {
      imports: [IdempotencyModule.forRoot({ store: quotaCache })],
      controllers: [FloodController],
    });
  });
  afterAll(async () => {
    await app.close();
    await quotaApp.close();
  });

  // Thousands of requests per test, one after another: over kept-alive sockets, not a connection (and
  // with supertest a listen) per request.
  const bases = new WeakMap<INestApplication, Promise<string>>();
  const charge = async (a: INestApplication, key: string) => {
    if (!bases.has(a)) bases.set(a, listen(a));
    return post(`${await bases.get(a)!}/charge`, '', { 'idempotency-key': key });
  };
  const replayed = async (a: INestApplication, keys: string[]) => {
    let n = 0;
    for (const k of keys) if ((await charge(a, k)).headers['idempotent-replayed'] === 'true') n++;
    return n;
  };

  it('a flood of 10 x N plain entries leaves every stored record in place', async () => {
    const keys = Array.from({ length: N / 2 }, (_, i) => `plain-flood-${i}`);
    for (const k of keys) expect((await charge(app, k)).status).toBe(201);
    for (let i = 0; i < 10 * N; i++) cache.set(`cached:${i}`, { page: i });
    expect(cache.size).toBe(N);
    const kept = await replayed(app, keys);
    expect(kept).toBe(keys.length);
    if (adapter === 'express')
      report.push(`${10 * N} plain entries over ${keys.length} records: ${kept}/${keys.length} records replay`);
  }, 120_000);

  it('a flood of 10 x N unique keys stays within N entries and evicts the oldest records first', async () => {
    const floodCache = new InMemoryStore({ maxEntries: N });
    const floodApp = await startApp(adapter, {
      imports: [IdempotencyModule.forRoot({ store: floodCache })],
      controllers: [FloodController],
    });
    try {
      await uniqueFlood(floodApp, floodCache);
    } finally {
      await floodApp.close();
    }
  }, 120_000);

  it('records that were retried outlive a flood of never-retried keys', async () => {
    const floodCache = new InMemoryStore({ maxEntries: N });
    const floodApp = await startApp(adapter, {
      imports: [IdempotencyModule.forRoot({ store: floodCache })],
      controllers: [FloodController],
    });
    try {
      const retried = Array.from({ length: N / 4 }, (_, i) => `retried-${i}`);
      for (const k of retried) await charge(floodApp, k);
      expect(await replayed(floodApp, retried)).toBe(retried.length); // read once: now "used"
      for (let i = 0; i < 10 * N; i++) await charge(floodApp, `attacker-${i}`);
      const kept = await replayed(floodApp, retried);
      expect(kept).toBe(retried.length);
      if (adapter === 'express') {
        report.push(
          `${retried.length} records read once, then ${10 * N} attacker keys: ${kept}/${retried.length} still replay (unread entries go first)`,
        );
      }
    } finally {
      await floodApp.close();
    }
  }, 120_000);

  async function uniqueFlood(app: INestApplication, cache: InMemoryStore): Promise<void> {
    const keys = Array.from({ length: 10 * N }, (_, i) => `unique-flood-${i}`);
    let peak = 0;
    for (const k of keys) {
      expect((await charge(app, k)).status).toBe(201);
      peak = Math.max(peak, cache.size);
    }
    expect(peak).toBeLessThanOrEqual(N);
    // The newest N keys are held (read now, in order, so no read evicts another of them)...
    const newest = keys.slice(-N);
    expect(await replayed(app, newest)).toBe(N);
    // ...and the oldest are gone: retrying one runs the handler again.
    const oldest = keys.slice(0, 20);
    const before = app.get(FloodController).runs;
    expect(await replayed(app, oldest)).toBe(0);
    expect(app.get(FloodController).runs).toBe(before + oldest.length);
    if (adapter === 'express') {
      report.push(
        `${keys.length} unique keys: peak ${peak} entries; newest ${N} replay, oldest ${keys.length - N} were evicted (victims' retries run again)`,
      );
    }
  }

  it("prefixQuotas keep the reserved prefix's records through a flood under another prefix", async () => {
    const keys = Array.from({ length: N / 2 }, (_, i) => `quota-${i}`);
    for (const k of keys) expect((await charge(quotaApp, k)).status).toBe(201);
    // A rate limiter's counters carry a guarantee too: only the quota ranks them against records.
    for (let i = 0; i < 10 * N; i++) quotaCache.set(`rl:${i}`, i, { guaranteed: true, ttlMs: 60_000 });
    expect(quotaCache.size).toBe(N);
    const kept = await replayed(quotaApp, keys);
    expect(kept).toBe(keys.length);
    if (adapter === 'express')
      report.push(`quota idem:=${N / 2}: ${10 * N} guaranteed rl: entries, ${kept}/${keys.length} records replay`);
  }, 120_000);
});
