import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { IdempotencyModule } from '../../lib/index.js';
import { ADAPTERS, startApp } from '../support/app.js';
import { Gate, Runs, TestController } from '../support/fixtures.js';
import { openStore, storeNames, type StoreUnderTest } from '../support/stores.js';

let seq = 0;
const newKey = (): string => `key-${Date.now()}-${++seq}`;

const MATRIX = ADAPTERS.flatMap((adapter) => storeNames('core e2e on PostgreSQL').map((store) => [adapter, store] as const));

// B1, B2, B4 and B8 are drawn in docs/guides/flows.md: keep the diagrams and these tests telling the same sequence.
describe.each(MATRIX)('core behaviour (docs/behaviour.md) on %s with the %s store', (adapter, storeName) => {
  let app: INestApplication;
  let runs: Runs;
  let gate: Gate;
  let store: StoreUnderTest;

  beforeAll(async () => {
    store = await openStore(storeName);
    app = await startApp(adapter, {
      imports: [IdempotencyModule.forRoot({ store: store.cache })],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    runs = app.get(Runs);
    gate = app.get(Gate);
  });
  afterAll(() => app.close());
  afterEach(() => gate.release());

  const server = () => app.getHttpServer();

  it('B1. runs the handler once and sends its response unchanged', async () => {
    const key = newKey();
    const before = runs.of('payments');
    const res = await request(server()).post('/payments').set('Idempotency-Key', key).send({ amount: 100 });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ txId: `tx-${before + 1}`, key, body: { amount: 100 } });
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    expect(runs.of('payments')).toBe(before + 1);
  });

  it('B2. replays status, headers and the exact body bytes without running the handler', async () => {
    const key = newKey();
    const first = await request(server()).post('/payments').set('Idempotency-Key', key).send({ amount: 5 });
    const count = runs.of('payments');
    const second = await request(server()).post('/payments').set('Idempotency-Key', key).send({ amount: 5 });
    expect(runs.of('payments')).toBe(count);
    expect(second.status).toBe(first.status);
    expect(second.text).toBe(first.text);
    expect(Buffer.from(second.text)).toEqual(Buffer.from(first.text));
    for (const h of ['content-type', 'location', 'etag', 'x-custom']) {
      expect(second.headers[h]).toBe(first.headers[h]);
    }
    expect(first.headers['x-custom']).toBe('custom-value');
    expect(second.headers['idempotent-replayed']).toBe('true');
  });

  it('B2. replays a text body byte for byte, non-ASCII included', async () => {
    const key = newKey();
    const first = await request(server()).post('/text').set('Idempotency-Key', key).buffer(true);
    const second = await request(server()).post('/text').set('Idempotency-Key', key).buffer(true);
    expect(first.text).toContain('ünïcode');
    expect(second.text).toBe(first.text);
    expect(second.headers['content-type']).toBe(first.headers['content-type']);
    expect(runs.of('text')).toBe(1);
  });

  it('B2. works for PUT, PATCH and DELETE', async () => {
    for (const [method, path, name] of [
      ['put', '/items/7', 'put'],
      ['patch', '/items/7', 'patch'],
      ['delete', '/items/7', 'delete'],
    ] as const) {
      const key = newKey();
      const before = runs.of(name);
      const a = await request(server())[method](path).set('Idempotency-Key', key);
      const b = await request(server())[method](path).set('Idempotency-Key', key);
      expect(b.status).toBe(a.status);
      expect(b.text).toBe(a.text);
      expect(b.headers['idempotent-replayed']).toBe('true');
      expect(runs.of(name)).toBe(before + 1);
    }
  });

  it('B3. a reordered query replays; another value, value order, path or body gets 422', async () => {
    const key = newKey();
    const first = await request(server()).post('/payments?a=1&b=2&tag=x&tag=y').set('Idempotency-Key', key).send({ p: 1, q: 2 });
    expect(first.status).toBe(201);
    const reordered = await request(server())
      .post('/payments?tag=x&b=2&tag=y&a=1')
      .set('Idempotency-Key', key)
      .set('content-type', 'application/json')
      .send('{"q":2,"p":1}');
    expect(reordered.status).toBe(201);
    expect(reordered.text).toBe(first.text);
    expect(reordered.headers['idempotent-replayed']).toBe('true');
    for (const [path, body] of [
      ['/payments?a=1&b=3&tag=x&tag=y', { p: 1, q: 2 }],
      ['/payments?a=1&b=2&tag=y&tag=x', { p: 1, q: 2 }],
      ['/payments?a=1&b=2&tag=x&tag=y', { p: 1, q: 3 }],
      ['/payments?a=1&b=2&tag=x', { p: 1, q: 2 }],
    ] as const) {
      const res = await request(server()).post(path).set('Idempotency-Key', key).send(body);
      expect(res.status).toBe(422);
      expect(res.body).toEqual({ error: 'idempotency-key was already used for a different request' });
    }
    // Same key on another route: another method and path, so another request.
    const otherRoute = await request(server()).put('/items/1?a=1&b=2&tag=x&tag=y').set('Idempotency-Key', key);
    expect(otherRoute.status).toBe(422);
  });

  it('B4. a concurrent duplicate gets 409 at once with Retry-After: 1', async () => {
    const key = newKey();
    gate.close();
    const entered = gate.whenEntered();
    const first = request(server())
      .post('/payments')
      .set('Idempotency-Key', key)
      .send({ amount: 1 })
      .then((r) => r);
    await entered;
    const dup = await request(server()).post('/payments').set('Idempotency-Key', key).send({ amount: 1 });
    expect(dup.status).toBe(409);
    expect(dup.text).toBe('{"error":"idempotency-key in-flight; retry shortly"}');
    expect(dup.headers['retry-after']).toBe('1');
    expect(dup.headers['content-type']).toMatch(/^application\/json/);
    gate.release();
    const done = await first;
    expect(done.status).toBe(201);
    const retry = await request(server()).post('/payments').set('Idempotency-Key', key).send({ amount: 1 });
    expect(retry.text).toBe(done.text);
  });

  it('B5. a missing or white-space key is rejected with 400; pass-through runs every time and stores nothing', async () => {
    const missing = await request(server()).post('/payments').send({});
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ error: 'idempotency-key header is required' });
    const blank = await request(server()).post('/payments').set('Idempotency-Key', '   ').send({});
    expect(blank.status).toBe(400);
    expect(blank.body).toEqual({ error: 'idempotency-key header is required' });

    const size = await store.count();
    const a = await request(server()).post('/optional');
    const b = await request(server()).post('/optional').set('Idempotency-Key', '  ');
    expect(a.status).toBe(201);
    expect(b.body.run).toBe(a.body.run + 1);
    expect(a.body.key).toBeNull();
    expect(await store.count()).toBe(size);
    const keyed = newKey();
    const c = await request(server()).post('/optional').set('Idempotency-Key', keyed);
    const d = await request(server()).post('/optional').set('Idempotency-Key', keyed);
    expect(d.text).toBe(c.text);
    expect(c.body.key).toBe(keyed);
  });

  it('B8. a returned error status is stored and replayed (@HttpCode and @Res passthrough)', async () => {
    for (const path of ['/declined', '/passthrough']) {
      const key = newKey();
      const a = await request(server()).post(path).set('Idempotency-Key', key);
      const b = await request(server()).post(path).set('Idempotency-Key', key);
      expect(a.status).toBe(402);
      expect(b.status).toBe(402);
      expect(b.text).toBe(a.text);
      expect(b.headers['idempotent-replayed']).toBe('true');
    }
    expect(runs.of('declined')).toBe(1);
    expect(runs.of('passthrough')).toBe(1);
  });

  it('B8. a thrown error frees the key: the retry runs the handler again', async () => {
    const key = newKey();
    const a = await request(server()).post('/throws').set('Idempotency-Key', key);
    const b = await request(server()).post('/throws').set('Idempotency-Key', key);
    expect(a.status).toBe(400);
    expect(b.status).toBe(400);
    expect(b.headers['idempotent-replayed']).toBeUndefined();
    expect(runs.of('throws')).toBe(2);
    const c = await request(server()).post('/crashes').set('Idempotency-Key', key);
    const d = await request(server()).post('/crashes').set('Idempotency-Key', key);
    expect([c.status, d.status]).toEqual([500, 500]);
    expect(runs.of('crashes')).toBe(2);
    expect(d.text).not.toContain('/secret');
  });

  it('B9. after the ttl the key is forgotten and the handler runs again', async () => {
    const key = newKey();
    // PostgreSQL's clock cannot be moved: a 50 ms ttl there would lapse on a busy machine before the retry.
    const [path, ttlMs] = storeName === 'postgres' ? ['/short-real', 1500] : ['/short', 50];
    const a = await request(server()).post(path).set('Idempotency-Key', key);
    const b = await request(server()).post(path).set('Idempotency-Key', key);
    expect(b.text).toBe(a.text);
    await store.advance(ttlMs + 1);
    const c = await request(server()).post(path).set('Idempotency-Key', key);
    expect(c.headers['idempotent-replayed']).toBeUndefined();
    expect(c.body.run).toBe(a.body.run + 1);
  });

  it("identity: a class resolver sees the guard's user and scopes keys per caller", async () => {
    const key = newKey();
    const alice = await request(server()).post('/scoped').set('Idempotency-Key', key).set('x-user', 'alice');
    const bob = await request(server()).post('/scoped').set('Idempotency-Key', key).set('x-user', 'bob');
    const alice2 = await request(server()).post('/scoped').set('Idempotency-Key', key).set('x-user', 'alice');
    expect(bob.headers['idempotent-replayed']).toBeUndefined();
    expect(bob.body.run).toBe(alice.body.run + 1);
    expect(alice2.text).toBe(alice.text);
    expect(alice2.headers['idempotent-replayed']).toBe('true');
  });

  it('identity: a function resolver scopes keys; a bad scope is a 400 naming no bytes', async () => {
    const key = newKey();
    const a = await request(server()).post('/scoped-fn').set('Idempotency-Key', key).set('x-account', 'acct:1');
    const b = await request(server()).post('/scoped-fn').set('Idempotency-Key', key).set('x-account', 'acct:2');
    expect(b.body.run).toBe(a.body.run + 1);
    const long = await request(server()).post('/scoped-fn').set('Idempotency-Key', key).set('x-account', 'z'.repeat(256));
    expect(long.status).toBe(400);
    expect(long.body).toEqual({ error: 'identity scope exceeds 255 characters' });
    const spaced = await request(server()).post('/scoped-fn').set('Idempotency-Key', key).set('x-account', 'evil account');
    expect(spaced.status).toBe(400);
    expect(spaced.body).toEqual({
      error: 'identity scope has a control character, a space or an invisible character at index 4',
    });
  });
});
