import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, type INestApplication, Post } from '@nestjs/common';
import Stripe from 'stripe';
import request from 'supertest';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import type { IdempotencyErrorInfo } from '../../lib/shared/interfaces/idempotency-error.interface.js';
import { ADAPTERS, listen, startApp } from '../support/app.js';
import { Gate, Runs, TestController } from '../support/fixtures.js';

let seq = 0;
const newKey = (): string => `cc-${Date.now()}-${++seq}`;

/** Stripe's error shape: its SDK reads `error.type` and `error.message`. */
const stripeErrorBody = ({ message }: IdempotencyErrorInfo) => ({ error: { type: 'idempotency_error', message } });

describe.each(ADAPTERS)('errorBody and echoKeyHeader on %s', (adapter) => {
  let app: INestApplication;
  let gate: Gate;
  let runs: Runs;
  const seen: IdempotencyErrorInfo[] = [];
  beforeAll(async () => {
    app = await startApp(adapter, {
      imports: [
        IdempotencyModule.forRoot({
          errorBody: (error) => {
            seen.push(error);
            return stripeErrorBody(error);
          },
          echoKeyHeader: true,
        }),
      ],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    gate = app.get(Gate);
    runs = app.get(Runs);
  });
  afterAll(() => app.close());
  afterEach(() => gate.release());
  const post = (key: string | undefined, path = '/payments', body: object = { amount: 7 }) => {
    const req = request(app.getHttpServer()).post(path);
    return (key === undefined ? req : req.set('Idempotency-Key', key)).send(body);
  };

  it('answers every error of the module in the shape errorBody builds, status and headers unchanged', async () => {
    seen.length = 0;
    const missing = await post(undefined);
    expect(missing.status).toBe(400);
    expect(missing.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(missing.body).toEqual({ error: { type: 'idempotency_error', message: 'idempotency-key header is required' } });
    const key = newKey();
    const first = await gate.hold(() => post(key));
    const busy = await post(key);
    expect(busy.status).toBe(409);
    expect(busy.headers['retry-after']).toBe('1');
    expect(busy.body).toEqual({ error: { type: 'idempotency_error', message: 'idempotency-key in-flight; retry shortly' } });
    gate.release();
    expect((await first.answer).status).toBe(201);
    const reused = await post(key, '/payments', { amount: 8 });
    expect(reused.status).toBe(422);
    expect(reused.body.error.message).toBe('idempotency-key was already used for a different request');
    expect(seen.map((e) => [e.status, e.code])).toEqual([
      [400, 'key-missing'],
      [409, 'key-in-flight'],
      [422, 'key-reused'],
    ]);
    // The handler's own answers are the application's: errorBody shapes only the module's.
    const replay = await post(key);
    expect(replay.body.txId).toBeDefined();
  });

  it('echoes the key as sent on the first response, replays, 409, 422 and handler errors; never an invalid key', async () => {
    const key = newKey();
    const first = await post(key);
    expect(first.status).toBe(201);
    expect(first.headers['idempotency-key']).toBe(key);
    const again = await post(key);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.headers['idempotency-key']).toBe(key);
    // Quoted (a Structured Field String), the same key replays and is echoed in the form it came in.
    const quoted = await post(`"${key}"`);
    expect(quoted.headers['idempotent-replayed']).toBe('true');
    expect(quoted.headers['idempotency-key']).toBe(`"${key}"`);
    const reused = await post(key, '/payments', { amount: 99 });
    expect(reused.status).toBe(422);
    expect(reused.headers['idempotency-key']).toBe(key);
    const busyKey = newKey();
    const running = await gate.hold(() => post(busyKey));
    const busy = await post(busyKey);
    expect(busy.status).toBe(409);
    expect(busy.headers['idempotency-key']).toBe(busyKey);
    gate.release();
    expect((await running.answer).headers['idempotency-key']).toBe(busyKey);
    const thrown = await post(newKey(), '/throws');
    expect(thrown.status).toBe(400);
    expect(thrown.headers['idempotency-key']).toMatch(/^cc-/);
    expect((await post(undefined)).headers['idempotency-key']).toBeUndefined();
    const invalid = await post('"unterminated-secret');
    expect(invalid.status).toBe(400);
    expect(invalid.headers['idempotency-key']).toBeUndefined();
    expect(invalid.text).not.toContain('secret');
    const long = await post('k'.repeat(256));
    expect(long.status).toBe(400);
    expect(long.headers['idempotency-key']).toBeUndefined();
  });

  it('does not store the echo: a replay echoes the key of the retry, not the first', async () => {
    const key = newKey();
    const before = runs.of('payments');
    await post(`"${key}"`);
    const bare = await post(key);
    expect(bare.headers['idempotency-key']).toBe(key);
    expect(runs.of('payments')).toBe(before + 1);
  });
});

@Controller('v1')
class ChargesController {
  constructor(
    readonly runs: Runs,
    readonly gate: Gate,
  ) {}

  @Post('charges')
  @Idempotent()
  async create(@Body() body: Record<string, string>) {
    const n = this.runs.hit('charges');
    await this.gate.pass();
    return { id: `ch_${n}`, object: 'charge', amount: Number(body.amount) };
  }
}

/**
 * The official Stripe SDK as the client, pointed at the app: what its users get with the
 * module's default errors and with the clients guide's recipe.
 */
describe.each(ADAPTERS)('behind the Stripe SDK on %s', (adapter) => {
  const apps: INestApplication[] = [];
  afterAll(() => Promise.all(apps.map((a) => a.close())));
  const start = async (options: Parameters<typeof IdempotencyModule.forRoot>[0]) => {
    const app = await startApp(adapter, {
      imports: [IdempotencyModule.forRoot(options)],
      controllers: [ChargesController],
      providers: [Runs, Gate],
    });
    apps.push(app);
    const url = new URL(await listen(app));
    const stripe = (maxNetworkRetries: number) =>
      new Stripe('sk_test_local', {
        host: url.hostname,
        port: Number(url.port),
        protocol: 'http',
        maxNetworkRetries,
        telemetry: false,
      });
    return { app, stripe, gate: app.get(Gate), runs: app.get(Runs) };
  };
  const charge = (stripe: Stripe, key: string, amount = 100) =>
    stripe.rawRequest('POST', '/v1/charges', { amount }, { idempotencyKey: key });
  const failure = (promise: Promise<unknown>) =>
    promise.then(
      () => {
        throw new Error('expected the request to fail');
      },
      (err: unknown) => err as InstanceType<typeof Stripe.errors.StripeError>,
    );

  it('with the default body the SDK reports an OAuth error with an empty message; with the recipe, the sentence', async () => {
    const plain = await start({});
    const key = newKey();
    await charge(plain.stripe(0), key);
    const oauth = await failure(charge(plain.stripe(0), key, 200));
    expect(oauth.statusCode).toBe(422);
    expect(oauth.type).toBe('StripeOAuthError');
    expect(oauth.message).toBe('');

    const recipe = await start({ errorBody: stripeErrorBody, echoKeyHeader: true });
    await charge(recipe.stripe(0), key);
    const reused = await failure(charge(recipe.stripe(0), key, 200));
    expect(reused.statusCode).toBe(422);
    expect(reused.rawType).toBe('idempotency_error');
    expect(reused.message).toBe('idempotency-key was already used for a different request');
    expect(reused.headers?.['idempotency-key']).toBe(key);
    // A 400 with Stripe's type is the SDK's idempotency error class.
    const tooLong = await failure(charge(recipe.stripe(0), 'k'.repeat(256)));
    expect(tooLong).toBeInstanceOf(Stripe.errors.StripeIdempotencyError);
    expect(tooLong.message).toBe('idempotency-key exceeds 255 characters');
  });

  it('reads the echoed key into lastResponse, and gets the replay of the first charge', async () => {
    const { stripe, runs } = await start({ errorBody: stripeErrorBody, echoKeyHeader: true });
    const key = newKey();
    const first = (await charge(stripe(0), key)) as { id: string; lastResponse: { idempotencyKey: string } };
    const again = (await charge(stripe(0), key)) as { id: string; lastResponse: { headers: Record<string, string> } };
    expect(first.lastResponse.idempotencyKey).toBe(key);
    expect(again.id).toBe(first.id);
    expect(again.lastResponse.headers['idempotent-replayed']).toBe('true');
    expect(runs.of('charges')).toBe(1);
  });

  it('retries a 409 on its own (after about 0.5 s, ignoring Retry-After) and gets the replay once the first is done', async () => {
    const { stripe, gate, runs } = await start({ errorBody: stripeErrorBody });
    const key = newKey();
    const first = await gate.hold(() => charge(stripe(0), key));
    const noRetry = await failure(charge(stripe(0), key));
    expect(noRetry.statusCode).toBe(409);
    expect(noRetry.rawType).toBe('idempotency_error');
    const retrying = charge(stripe(3), key);
    // Released while the SDK sleeps before its first retry.
    setTimeout(() => gate.release(), 100);
    const [a, b] = (await Promise.all([first.answer, retrying])) as { id: string }[];
    expect(b.id).toBe(a.id);
    expect(runs.of('charges')).toBe(1);
  });
});
