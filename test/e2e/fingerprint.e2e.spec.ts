import { describe, expect, it } from '@jest/globals';
import { BadRequestException, Body, Controller, HttpCode, Post } from '@nestjs/common';
import request from 'supertest';
import type { FingerprintMode } from '../../lib/shared/interfaces/idempotent-options.interface.js';
import { IdempotencyModule, Idempotent, InMemoryStore } from '../../lib/index.js';
import { ADAPTERS, useApps } from '../support/app.js';
import { spyOnLogger } from '../support/logger.js';

let runs = 0;

@Controller('pay')
class PayController {
  @Post()
  @HttpCode(201)
  @Idempotent()
  raw(@Body() body: unknown) {
    return { run: ++runs, body };
  }

  @Post('canonical')
  @HttpCode(201)
  @Idempotent({ fingerprint: 'canonical' })
  canonical(@Body() body: unknown) {
    return { run: ++runs, body };
  }
}

let seq = 0;
const newKey = () => `fp-${Date.now()}-${++seq}`;

describe.each(ADAPTERS)("fingerprint: 'raw' on %s", (adapter) => {
  const start = useApps();
  const log = spyOnLogger();
  const app = (rawBody: boolean) =>
    start(adapter, { imports: [IdempotencyModule.forRoot({ fingerprint: 'raw' })], controllers: [PayController] }, { rawBody });
  const post = (server: unknown, path: string, key: string, text: string) =>
    request(server as never)
      .post(path)
      .set('Idempotency-Key', key)
      .set('content-type', 'application/json')
      .send(text);

  it('replays the same bytes; the same data in another key order or spacing is another request (422)', async () => {
    const server = (await app(true)).getHttpServer();
    const key = newKey();
    const first = await post(server, '/pay', key, '{"amount":1,"currency":"EUR"}');
    expect(first.status).toBe(201);
    const again = await post(server, '/pay', key, '{"amount":1,"currency":"EUR"}');
    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect((await post(server, '/pay', key, '{"currency":"EUR","amount":1}')).status).toBe(422);
    expect((await post(server, '/pay', key, '{"amount": 1, "currency": "EUR"}')).status).toBe(422);
    expect(log.warnings).not.toHaveBeenCalled();
  });

  it("a route's own fingerprint: 'canonical' replays the same data in another key order", async () => {
    const server = (await app(true)).getHttpServer();
    const key = newKey();
    const first = await post(server, '/pay/canonical', key, '{"amount":1,"currency":"EUR"}');
    const reordered = await post(server, '/pay/canonical', key, '{ "currency": "EUR", "amount": 1 }');
    expect(reordered.status).toBe(201);
    expect(reordered.text).toBe(first.text);
    expect(reordered.headers['idempotent-replayed']).toBe('true');
  });

  it('without rawBody: true, fingerprints the parsed body and says once how to keep the bytes', async () => {
    const server = (await app(false)).getHttpServer();
    const key = newKey();
    const first = await post(server, '/pay', key, '{"amount":1,"currency":"EUR"}');
    const reordered = await post(server, '/pay', key, '{"currency":"EUR","amount":1}');
    expect(reordered.status).toBe(201);
    expect(reordered.text).toBe(first.text);
    await post(server, '/pay', newKey(), '{"amount":2}');
    expect(log.warnings).toHaveBeenCalledTimes(1);
    expect(String(log.warnings.mock.calls[0][0])).toContain('rawBody: true');
  });
});

/** What makes two payments the same: amount and currency, not the client's timestamp. */
const paymentTerms = (req: { body?: { amount?: unknown; currency?: unknown } }) => {
  if (typeof req.body?.amount !== 'number') throw new BadRequestException('amount must be a number');
  return { amount: req.body.amount, currency: req.body.currency ?? 'EUR' };
};

@Controller('charges')
class ChargeController {
  @Post()
  @HttpCode(201)
  @Idempotent({ fingerprint: paymentTerms })
  create(@Body() body: unknown) {
    return { run: ++runs, body };
  }
}

describe.each(ADAPTERS)('a fingerprint function on %s', (adapter) => {
  const start = useApps();
  spyOnLogger();
  const post = (server: unknown, key: string, body: object) =>
    request(server as never)
      .post('/charges')
      .set('Idempotency-Key', key)
      .send(body);

  it('replays a retry that differs only outside what the function picks; 422 when the picked part differs', async () => {
    const server = (
      await start(adapter, { imports: [IdempotencyModule.forRoot()], controllers: [ChargeController] })
    ).getHttpServer();
    const key = newKey();
    const first = await post(server, key, { amount: 5, sentAt: '10:00:00' });
    expect(first.status).toBe(201);
    const retry = await post(server, key, { sentAt: '10:00:03', amount: 5, currency: 'EUR' });
    expect(retry.status).toBe(201);
    expect(retry.text).toBe(first.text);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect((await post(server, key, { amount: 6, sentAt: '10:00:00' })).status).toBe(422);
    expect((await post(server, key, { amount: 5, currency: 'USD' })).status).toBe(422);
  });

  it("answers what the function throws through the application's filters, and claims nothing", async () => {
    const server = (
      await start(adapter, { imports: [IdempotencyModule.forRoot()], controllers: [ChargeController] })
    ).getHttpServer();
    const key = newKey();
    const before = runs;
    const bad = await post(server, key, { amount: 'five' });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toBe('amount must be a number');
    const good = await post(server, key, { amount: 5 });
    expect(good.status).toBe(201);
    expect(good.headers['idempotent-replayed']).toBeUndefined();
    expect(runs).toBe(before + 1);
  });
});

@Controller('deploy')
class DeployController {
  @Post()
  @HttpCode(201)
  @Idempotent()
  create(@Body() body: unknown) {
    return { run: ++runs, body };
  }
}

describe.each(ADAPTERS)('changing the fingerprint setting between deploys on %s', (adapter) => {
  const start = useApps();
  const log = spyOnLogger();
  const post = (server: unknown, key: string, text: string) =>
    request(server as never)
      .post('/deploy')
      .set('Idempotency-Key', key)
      .set('content-type', 'application/json')
      .send(text);
  /** Three versions of one application sharing one store, as pods do during a rolling deploy. */
  const versions = async () => {
    const cache = new InMemoryStore();
    const version = async (fingerprint: FingerprintMode) =>
      (
        await start(
          adapter,
          { imports: [IdempotencyModule.forRoot({ store: cache, fingerprint })], controllers: [DeployController] },
          { rawBody: true },
        )
      ).getHttpServer();
    return {
      canonical: await version('canonical'),
      raw: await version('raw'),
      picked: await version((req: { body: { amount: number } }) => ({ amount: req.body.amount })),
    };
  };

  it('recognises honest retries of records made under a built-in setting, and still refuses other requests', async () => {
    const { canonical, raw, picked } = await versions();
    const before = runs;
    const key = newKey();
    const first = await post(canonical, key, '{"amount":1,"note":"a"}');
    expect(first.status).toBe(201);
    // The bytes differ (spacing): recomputed canonically they are the same request.
    const viaRaw = await post(raw, key, '{ "amount": 1, "note": "a" }');
    expect(viaRaw.headers['idempotent-replayed']).toBe('true');
    expect(viaRaw.text).toBe(first.text);
    expect((await post(picked, key, '{"note":"a","amount":1}')).headers['idempotent-replayed']).toBe('true');
    expect((await post(raw, key, '{"amount":2,"note":"a"}')).status).toBe(422);
    expect((await post(picked, key, '{"amount":1,"note":"b"}')).status).toBe(422);

    const rawKey = newKey();
    expect((await post(raw, rawKey, '{"amount":1}')).status).toBe(201);
    expect((await post(canonical, rawKey, '{"amount":1}')).headers['idempotent-replayed']).toBe('true');
    // A record of the bytes needs the same bytes, whatever the setting now.
    expect((await post(canonical, rawKey, '{ "amount": 1 }')).status).toBe(422);
    expect(runs).toBe(before + 2);
    expect(log.warnings).not.toHaveBeenCalled();
  });

  it("takes a retry of a function's record as the same request on another setting, and says so", async () => {
    const { canonical, picked } = await versions();
    const before = runs;
    const key = newKey();
    const first = await post(picked, key, '{"amount":1,"note":"a"}');
    const other = await post(canonical, key, '{"amount":1,"note":"b"}');
    expect(other.status).toBe(201);
    expect(other.text).toBe(first.text);
    expect(other.headers['idempotent-replayed']).toBe('true');
    expect(runs).toBe(before + 1);
    expect(log.warnings).toHaveBeenCalledTimes(1);
    expect(String(log.warnings.mock.calls[0][0])).toMatch(
      /^DeployController\.create: the key's stored fingerprint was made by another fingerprint setting \("f1-[\w-]{8}"\)/,
    );
  });
});

let spelled = 0;

@Controller('api')
class SpelledController {
  @Post('plain')
  @Idempotent()
  plain(@Body() body: unknown) {
    return { run: ++spelled, body };
  }

  @Post('orders/:id/pay')
  @Idempotent()
  pay(@Body() body: unknown) {
    return { run: ++spelled, body };
  }
}

// Issue 44 item 15: Express routes /api/plain/ and /api/PLAIN to /api/plain's handler, and they got 422 against its key.
describe.each(ADAPTERS)('path spellings one route answers to, on %s', (adapter) => {
  const start = useApps();
  const post = (server: unknown, path: string, key: string) =>
    request(server as never)
      .post(path)
      .set('Idempotency-Key', key)
      .send({ amount: 1 });

  it('the fingerprint is of the route the request reached: a spelling the router takes for it replays', async () => {
    spelled = 0;
    const nest = await start(
      adapter,
      { imports: [IdempotencyModule.forRoot({})], controllers: [SpelledController] },
      adapter === 'fastify' ? { fastify: { routerOptions: { caseSensitive: false, ignoreTrailingSlash: true } } } : {},
    );
    const server = nest.getHttpServer();
    const key = newKey();
    const first = await post(server, '/api/plain', key);
    expect(first.status).toBe(201);
    for (const spelling of ['/api/plain/', '/api/PLAIN', '/API/Plain/']) {
      const again = await post(server, spelling, key);
      expect([spelling, again.status, again.text]).toEqual([spelling, 201, first.text]);
      expect(again.headers['idempotent-replayed']).toBe('true');
    }
    const order = newKey();
    const paid = await post(server, '/api/orders/A7/pay', order);
    expect(paid.status).toBe(201);
    expect((await post(server, '/api/ORDERS/A7/pay/', order)).text).toBe(paid.text);
    // A parameter is the client's data: another value, or its case, is another request.
    expect((await post(server, '/api/orders/a7/pay', order)).status).toBe(422);
    expect((await post(server, '/api/orders/A8/pay', order)).status).toBe(422);
    expect(spelled).toBe(2);
  });
});
