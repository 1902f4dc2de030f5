import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { IDEMPOTENCY_CORS_HEADERS, IdempotencyModule } from '../../lib/index.js';
import { ADAPTERS, startApp } from '../support/app.js';
import { Gate, Runs, TestController } from '../support/fixtures.js';

let seq = 0;
const newKey = (): string => `std-${Date.now()}-${++seq}`;

describe.each(ADAPTERS)('IETF draft conformance on %s', (adapter) => {
  let app: INestApplication;
  let runs: Runs;
  beforeAll(async () => {
    app = await startApp(adapter, {
      imports: [IdempotencyModule.forRoot()],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    runs = app.get(Runs);
  });
  afterAll(() => app.close());
  const post = (key: string) => request(app.getHttpServer()).post('/payments').set('Idempotency-Key', key).send({ amount: 7 });

  it('a key sent as a Structured Field String replays the bare key, and the other way round', async () => {
    const key = newKey();
    const before = runs.of('payments');
    const bare = await post(key);
    const quoted = await post(`"${key}"`);
    expect(quoted.status).toBe(bare.status);
    expect(quoted.text).toBe(bare.text);
    expect(quoted.headers['idempotent-replayed']).toBe('true');
    const other = newKey();
    const first = await post(`"${other}"`);
    const again = await post(other);
    expect(again.text).toBe(first.text);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(runs.of('payments')).toBe(before + 2);
  });

  it('a malformed Structured Field String is a 400 that never echoes the key', async () => {
    const before = runs.of('payments');
    for (const bad of ['"secret-4711', '"secret-4711";a=1', '"secret-4711"x']) {
      const res = await post(bad);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({
        error:
          'idempotency-key starts with a quote but is not a valid Structured Field String (RFC 9651): unterminated, a bad escape, or something after the closing quote',
      });
      expect(res.text).not.toContain('secret');
    }
    expect(runs.of('payments')).toBe(before);
  });
});

describe.each(ADAPTERS)("errorFormat: 'problem+json' on %s", (adapter) => {
  let app: INestApplication;
  let gate: Gate;
  beforeAll(async () => {
    app = await startApp(adapter, {
      imports: [
        IdempotencyModule.forRoot({ errorFormat: 'problem+json', problemTypeBaseUrl: 'https://api.example.com/problems/' }),
      ],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    gate = app.get(Gate);
  });
  afterAll(() => app.close());
  afterEach(() => gate.release());
  const post = (key: string | undefined, body: object = { amount: 7 }) => {
    const req = request(app.getHttpServer()).post('/payments');
    return (key === undefined ? req : req.set('Idempotency-Key', key)).send(body);
  };
  const expectProblem = (res: request.Response, status: number, code: string, title: string, detail: string) => {
    expect(res.status).toBe(status);
    expect(res.headers['content-type']).toBe('application/problem+json');
    expect(JSON.parse(res.text)).toEqual({ type: `https://api.example.com/problems/${code}`, title, status, detail });
  };

  it('answers a missing key, a concurrent duplicate and a reused key with the draft’s problem types', async () => {
    expectProblem(await post(undefined), 400, 'key-missing', 'Idempotency-Key is missing', 'idempotency-key header is required');
    const key = newKey();
    const first = await gate.hold(() => post(key));
    const busy = await post(key);
    expectProblem(
      busy,
      409,
      'key-in-flight',
      'A request is outstanding for this Idempotency-Key',
      'idempotency-key in-flight; retry shortly',
    );
    expect(busy.headers['retry-after']).toBe('1');
    expect(busy.text).not.toContain(key);
    gate.release();
    expect((await first.answer).status).toBe(201);
    const reused = await post(key, { amount: 8 });
    expectProblem(
      reused,
      422,
      'key-reused',
      'Idempotency-Key is already used',
      'idempotency-key was already used for a different request',
    );
    expect(reused.text).not.toContain(key);
    const invalid = await post('"unterminated');
    expect(invalid.status).toBe(400);
    expect(JSON.parse(invalid.text)).toMatchObject({ type: 'https://api.example.com/problems/key-invalid', status: 400 });
  });
});

describe.each(ADAPTERS)("replayFlag: 'header-and-body' on %s", (adapter) => {
  let app: INestApplication;
  beforeAll(async () => {
    app = await startApp(adapter, {
      imports: [IdempotencyModule.forRoot({ replayFlag: 'header-and-body', replayedHeader: 'X-Idempotency-Replayed' })],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
  });
  afterAll(() => app.close());

  it('replays a 201 JSON body with "replayed": true, the right content-length and the header as configured', async () => {
    const key = newKey();
    const post = () => request(app.getHttpServer()).post('/payments').set('Idempotency-Key', key).send({ amount: 9 });
    const first = await post();
    expect(first.status).toBe(201);
    expect(first.body.replayed).toBeUndefined();
    expect(first.headers['x-idempotency-replayed']).toBeUndefined();
    const again = await post();
    expect(again.status).toBe(201);
    expect(again.body).toEqual({ ...first.body, replayed: true });
    expect(Number(again.headers['content-length'])).toBe(Buffer.byteLength(again.text));
    expect(again.headers['x-idempotency-replayed']).toBe('true');
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.headers['x-custom']).toBe('custom-value');
  });
});

describe.each(ADAPTERS)('CORS with IDEMPOTENCY_CORS_HEADERS on %s', (adapter) => {
  const ORIGIN = 'https://shop.example';
  let app: INestApplication;
  let gate: Gate;
  beforeAll(async () => {
    app = await startApp(
      adapter,
      { imports: [IdempotencyModule.forRoot()], controllers: [TestController], providers: [Runs, Gate] },
      {
        configure: (a) =>
          a.enableCors({
            origin: [ORIGIN, 'https://other.example'],
            allowedHeaders: ['Content-Type', ...IDEMPOTENCY_CORS_HEADERS.allowed],
            exposedHeaders: [...IDEMPOTENCY_CORS_HEADERS.exposed],
          }),
      },
    );
    gate = app.get(Gate);
  });
  afterAll(() => app.close());
  afterEach(() => gate.release());
  const list = (value: string | undefined) =>
    (value ?? '')
      .toLowerCase()
      .split(',')
      .map((h) => h.trim());
  const post = (key: string, origin = ORIGIN) =>
    request(app.getHttpServer()).post('/payments').set('Origin', origin).set('Idempotency-Key', key).send({ amount: 1 });

  it('a preflight lets a browser send the key', async () => {
    const res = await request(app.getHttpServer())
      .options('/payments')
      .set('Origin', ORIGIN)
      .set('Access-Control-Request-Method', 'POST')
      .set('Access-Control-Request-Headers', 'content-type,idempotency-key');
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(ORIGIN);
    expect(list(res.headers['access-control-allow-headers'])).toContain('idempotency-key');
  });

  it("lets the browser read the replay mark and Retry-After; a replay carries the retry's own CORS headers", async () => {
    const key = newKey();
    const exposed = (res: request.Response) => list(res.headers['access-control-expose-headers']);
    const first = await post(key);
    expect(first.status).toBe(201);
    const again = await post(key, 'https://other.example');
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.headers['access-control-allow-origin']).toBe('https://other.example');
    expect(exposed(again)).toEqual(expect.arrayContaining(['idempotent-replayed', 'retry-after']));
    const busyKey = newKey();
    const running = await gate.hold(() => post(busyKey));
    const busy = await post(busyKey);
    expect(busy.status).toBe(409);
    expect(busy.headers['retry-after']).toBe('1');
    expect(busy.headers['access-control-allow-origin']).toBe(ORIGIN);
    expect(exposed(busy)).toContain('retry-after');
    gate.release();
    expect((await running.answer).status).toBe(201);
  });
});
