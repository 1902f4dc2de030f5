import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import type { Server } from 'node:http';
import request from 'supertest';
import { IdempotencyModule } from '../../lib/index.js';
import { ADAPTERS, listen, startApp } from '../support/app.js';
import { Gate, Runs, TestController } from '../support/fixtures.js';
import { rawRequest } from '../support/raw-http.js';
import { openStore, storeNames, type StoreUnderTest } from '../support/stores.js';
import { sleep } from '../support/timing.js';

/** What no error body may contain (ATK-12): stack frames, file paths, module names. */
function expectNoInternals(text: string): void {
  expect(text).not.toMatch(/\bat [\w.<>]+ \(|\.ts\b|\.js\b|node_modules|\/work\/|\/secret|Error:/);
}

const MATRIX = ADAPTERS.flatMap((adapter) => storeNames('attack e2e on PostgreSQL').map((store) => [adapter, store] as const));

describe.each(MATRIX)(
  'attack list (docs/attacks.md) and key validation (docs/behaviour.md) on %s with the %s store',
  (adapter, storeName) => {
    let app: INestApplication;
    let runs: Runs;
    let gate: Gate;
    let base: string;
    let port: number;
    let store: StoreUnderTest;
    const probe = { owner: 'probe', fingerprint: 'probe', leaseMs: 1 };

    beforeAll(async () => {
      store = await openStore(storeName);
      app = await startApp(
        adapter,
        {
          imports: [IdempotencyModule.forRoot({ store: store.cache })],
          controllers: [TestController],
          providers: [Runs, Gate],
        },
        { maxHeaderSize: 4 * 1024 * 1024 },
      );
      runs = app.get(Runs);
      gate = app.get(Gate);
      base = await listen(app);
      port = Number(new URL(base).port);
    });
    afterAll(() => app.close());

    const server = () => app.getHttpServer() as Server;

    it('ATK-01: injection-looking keys are stored literally and replayed', async () => {
      for (const key of ['*', '{tag}', '__proto__', '%41', '{"$ne":null}', "';DROP-TABLE-idempotency_keys;--", 'constructor']) {
        const before = runs.of('payments');
        const a = await request(server()).post('/payments').set('Idempotency-Key', key).send({ n: 1 });
        const b = await request(server()).post('/payments').set('Idempotency-Key', key).send({ n: 1 });
        expect(a.status).toBe(201);
        expect(a.body.key).toBe(key);
        expect(b.text).toBe(a.text);
        expect(b.headers['idempotent-replayed']).toBe('true');
        expect(runs.of('payments')).toBe(before + 1);
        // The literal key is the cache key: no decoding (%41 stays %41), no prototype lookups.
        const stored = await store.cache.claim(`idem:%:${key}`, probe);
        expect(stored).toMatchObject({ state: 'completed', record: { response: { status: 201 } } });
      }
      expect(await store.cache.claim('idem:%:A', probe)).toEqual({ state: 'claimed' });
    });

    it("ATK-01: the seed's literal SQL key has spaces, so it is a 400", async () => {
      const res = await request(server()).post('/payments').set('Idempotency-Key', "'; DROP TABLE idempotency_keys; --").send({});
      expect(res.status).toBe(400);
      expect(res.body).toEqual({
        error: 'idempotency-key has a control character, a space or an invisible character at index 2',
      });
    });

    it('ATK-04: ten replays, the handler ran once', async () => {
      const before = runs.of('payments');
      const texts = new Set<string>();
      for (let i = 0; i < 10; i++) {
        const res = await request(server()).post('/payments').set('Idempotency-Key', 'atk-04').send({ amount: 10 });
        expect(res.status).toBe(201);
        texts.add(res.text);
      }
      expect(texts.size).toBe(1);
      expect(runs.of('payments')).toBe(before + 1);
    });

    it('ATK-05: a white-space key is a 400, like a missing one', async () => {
      for (const value of [' ', '\t', ' \t  ']) {
        const res = await rawRequest(port, 'POST', '/payments', [['Idempotency-Key', value]]);
        expect(res.status).toBe(400);
        expect(JSON.parse(res.body)).toEqual({ error: 'idempotency-key header is required' });
      }
    });

    it('B6. keys: 255 characters pass, 256 get 400 naming the limit, never the key', async () => {
      const ok = await request(server()).post('/payments').set('Idempotency-Key', 'k'.repeat(255)).send({});
      expect(ok.status).toBe(201);
      const long = await request(server())
        .post('/payments')
        .set('Idempotency-Key', `${'q'.repeat(255)}Z`)
        .send({});
      expect(long.status).toBe(400);
      expect(long.text).toBe('{"error":"idempotency-key exceeds 255 characters"}');
    });

    it('B6. keys: a space or tab anywhere is a 400 naming the index, never the key', async () => {
      const cases: [string, number][] = [
        ['ab cd', 2],
        ['SECRET\tX', 6],
        ['a\t\tb', 1],
      ];
      for (const [key, index] of cases) {
        const res = await rawRequest(port, 'POST', '/payments', [['Idempotency-Key', key]], '{}');
        expect(res.status).toBe(400);
        expect(JSON.parse(res.body)).toEqual({
          error: `idempotency-key has a control character, a space or an invisible character at index ${index}`,
        });
        expect(res.body).not.toContain('SECRET');
      }
    });

    it("B6. keys: other control bytes are refused (by Node's parser already) and never run the handler", async () => {
      const before = runs.total();
      for (const key of ['SECRET\x01', 'SECRET\x7f', 'SECRET\x1b[0m']) {
        const res = await rawRequest(port, 'POST', '/payments', [['Idempotency-Key', key]], '{}');
        expect(res.status).toBe(400);
        expect(res.body).not.toContain('SECRET');
      }
      expect(runs.total()).toBe(before);
    });

    it('B6. a 255-character key with a 255-character scope is accepted', async () => {
      const res = await request(server())
        .post('/scoped-fn')
        .set('Idempotency-Key', 'k'.repeat(255))
        .set('x-account', 's'.repeat(255));
      expect(res.status).toBe(201);
      expect((await store.cache.claim(`idem:${'s'.repeat(255)}:${'k'.repeat(255)}`, probe)).state).toBe('completed');
    });

    it('ATK-06: a 1 MiB key is refused by length with 400 and never stored', async () => {
      const size = await store.count();
      const key = 'x'.repeat(1024 * 1024);
      const res = await fetch(`${base}/payments`, {
        method: 'POST',
        headers: { 'Idempotency-Key': key, 'content-type': 'application/json' },
        body: '{}',
      });
      expect(res.status).toBe(400);
      const text = await res.text();
      expect(text).toBe('{"error":"idempotency-key exceeds 255 characters"}');
      expect(await store.count()).toBe(size);
    });

    it('ATK-09: 50 concurrent requests with one key: the handler runs once, the other 49 get 409', async () => {
      const before = runs.of('payments');
      gate.close();
      const entered = gate.whenEntered();
      const send = () =>
        fetch(`${base}/payments`, {
          method: 'POST',
          headers: { 'Idempotency-Key': 'atk-09', 'content-type': 'application/json' },
          body: '{"amount":9}',
        }).then(async (r) => ({ status: r.status, text: await r.text() }));
      const pending = Array.from({ length: 50 }, send);
      await entered;
      // Everything but the winner is answered while the winner is still held at the gate.
      const settled: { status: number; text: string }[] = [];
      const losers = pending.map((p) => p.then((r) => (r.status === 409 ? settled.push(r) : undefined)));
      await waitFor(() => settled.length === 49);
      gate.release();
      await Promise.all(losers);
      const results = await Promise.all(pending);
      expect(results.filter((r) => r.status === 201)).toHaveLength(1);
      expect(results.filter((r) => r.status === 409)).toHaveLength(49);
      expect(runs.of('payments')).toBe(before + 1);
    });

    it('ATK-12: no error body carries a stack trace, a path or client bytes', async () => {
      const marker = 'CLIENTBYTES';
      const responses = [
        await request(server()).post('/payments').send({}),
        await request(server()).post('/payments').set('Idempotency-Key', `${marker} x`).send({}),
        await request(server()).post('/payments').set('Idempotency-Key', marker.repeat(30)).send({}),
        await request(server()).post('/crashes').set('Idempotency-Key', 'atk-12-crash'),
        await request(server()).post('/scoped-fn').set('Idempotency-Key', 'atk-12').set('x-account', `${marker} y`),
      ];
      await request(server()).post('/payments').set('Idempotency-Key', 'atk-12').send({ a: 1 });
      responses.push(await request(server()).post('/payments').set('Idempotency-Key', 'atk-12').send({ a: marker }));
      for (const res of responses) {
        expect(res.status).toBeGreaterThanOrEqual(400);
        expectNoInternals(res.text);
        expect(res.text).not.toContain(marker);
        expect(res.text.length).toBeLessThan(120);
      }
      expect(responses.map((r) => r.status)).toEqual([400, 400, 400, 500, 400, 422]);
    });
  },
);

describe('Node itself refuses an oversized header (default maxHeaderSize)', () => {
  it.each(ADAPTERS)('answers 431 on %s before the app sees it', async (adapter) => {
    const app = await startApp(adapter, {
      imports: [IdempotencyModule.forRoot()],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    const base = await listen(app);
    try {
      const res = await fetch(`${base}/payments`, { method: 'POST', headers: { 'Idempotency-Key': 'x'.repeat(64 * 1024) } });
      expect(res.status).toBe(431);
      expect(app.get(Runs).total()).toBe(0);
    } finally {
      await app.close();
    }
  });
});

async function waitFor(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !condition(); i++) await sleep(10);
  if (!condition()) throw new Error('condition not met within 5 s');
}
