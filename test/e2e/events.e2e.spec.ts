import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, type INestApplication } from '@nestjs/common';
import { createHash } from 'node:crypto';
import request from 'supertest';
import type { IdempotencyClaim, IdempotencyRecord } from '../../lib/stores/index.js';
import { type IdempotencyEvent, type IdempotencyEventListener, IdempotencyModule, InMemoryStore } from '../../lib/index.js';
import { ADAPTERS, startApp, useApps } from '../support/app.js';
import { Gate, Runs, TestController } from '../support/fixtures.js';
import { spyOnLogger } from '../support/logger.js';
import { sleep, until } from '../support/timing.js';

let seq = 0;
const newKey = (): string => `ev-${Date.now()}-${++seq}`;
const sha256 = (key: string): string => createHash('sha256').update(key).digest('hex');

/** A real InMemoryStore that can be told to fail its next claims or commits, as a store outage would. */
class SwitchableCache extends InMemoryStore {
  claimsFail = false;
  commitsFail = false;
  override claim(key: string, claim: IdempotencyClaim) {
    return this.claimsFail ? Promise.reject(new Error('store down')) : super.claim(key, claim);
  }
  override commit(key: string, owner: string, record: IdempotencyRecord, ttlMs: number) {
    return this.commitsFail ? Promise.reject(new Error('store down')) : super.commit(key, owner, record, ttlMs);
  }
}

/** Collects events the way a listener class does, through the container (it injects Runs). */
@Injectable()
class Recorder implements IdempotencyEventListener {
  static readonly events: IdempotencyEvent[] = [];
  constructor(readonly runs: Runs) {}
  onIdempotencyEvent(event: IdempotencyEvent): void {
    Recorder.events.push({ ...event, runsSoFar: this.runs.total() } as IdempotencyEvent);
  }
}

describe.each(ADAPTERS)('events hook on %s', (adapter) => {
  let app: INestApplication;
  let gate: Gate;
  const store = new SwitchableCache();
  const events: IdempotencyEvent[] = [];
  beforeAll(async () => {
    app = await startApp(adapter, {
      // A short lease: a commit that keeps failing is given up after it (it is retried until then).
      imports: [IdempotencyModule.forRoot({ store: store, leaseMs: 600, events: (event) => void events.push(event) })],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    gate = app.get(Gate);
  });
  afterAll(() => app.close());
  afterEach(() => {
    gate.release();
    store.claimsFail = store.commitsFail = false;
  });
  spyOnLogger();
  const post = (key: string | undefined, path = '/payments', body: object = { amount: 7 }) => {
    const req = request(app.getHttpServer()).post(path);
    return (key === undefined ? req : req.set('Idempotency-Key', key)).send(body);
  };
  /** The events that arrive for the requests `work` makes (each request's after its response). */
  const eventsOf = async (work: () => Promise<unknown>, count: number): Promise<IdempotencyEvent[]> => {
    const from = events.length;
    await work();
    await until(() => events.length >= from + count);
    await sleep(20); // and no more than that
    return events.slice(from);
  };

  it('reports executed, replayed, conflict and mismatch with route, method, status, the key hash and store time', async () => {
    const key = newKey();
    const seen = await eventsOf(async () => {
      const first = await gate.hold(() => post(key));
      expect((await post(key)).status).toBe(409);
      gate.release();
      expect((await first.answer).status).toBe(201);
      expect((await post(key)).status).toBe(201);
      expect((await post(key, '/payments', { amount: 8 })).status).toBe(422);
    }, 4);
    expect(seen.map((e) => [e.outcome, e.status, e.code])).toEqual([
      ['conflict', 409, 'key-in-flight'],
      ['executed', 201, undefined],
      ['replayed', 201, undefined],
      ['mismatch', 422, 'key-reused'],
    ]);
    for (const e of seen) {
      expect(e).toMatchObject({ route: 'TestController.create', method: 'POST', keyHash: sha256(key), store: 'SwitchableCache' });
      expect(e.storeMs).toBeGreaterThan(0);
      expect(Math.abs(e.at - Date.now())).toBeLessThan(10_000);
      // Never the key or the body.
      expect(JSON.stringify(e)).not.toContain(key);
      expect(JSON.stringify(e)).not.toContain('amount');
    }
  });

  it('reports a rejection with its rule, a thrown error as released, no key on a pass-through route as bypassed', async () => {
    const seen = await eventsOf(async () => {
      expect((await post(undefined)).status).toBe(400);
      expect((await post('a'.repeat(300))).status).toBe(400);
      expect((await post(newKey(), '/throws')).status).toBe(400);
      expect((await post(undefined, '/optional')).status).toBe(201);
    }, 4);
    expect(seen.map((e) => [e.outcome, e.route, e.status, e.code, e.keyHash === undefined])).toEqual([
      ['rejected', 'TestController.create', 400, 'key-missing', true],
      ['rejected', 'TestController.create', 400, 'key-invalid', true],
      ['released', 'TestController.throws', undefined, undefined, false],
      ['bypassed', 'TestController.optional', undefined, undefined, true],
    ]);
    expect(seen[0].storeMs).toBe(0);
    expect(seen[2].storeMs).toBeGreaterThan(0);
  });

  it('reports a store that is down as store-unavailable, a commit that failed as not-stored', async () => {
    store.claimsFail = true;
    const down = await eventsOf(async () => expect((await post(newKey())).status).toBe(503), 1);
    expect(down.map((e) => [e.outcome, e.status, e.code])).toEqual([['store-unavailable', 503, 'store-unavailable']]);
    store.claimsFail = false;
    store.commitsFail = true;
    const lost = await eventsOf(async () => expect((await post(newKey())).status).toBe(201), 1);
    expect(lost.map((e) => [e.outcome, e.status])).toEqual([['not-stored', 201]]);
  });
});

describe.each(ADAPTERS)('events listeners on %s', (adapter) => {
  const start = useApps();
  const logs = spyOnLogger();
  const post = (app: INestApplication, key: string) =>
    request(app.getHttpServer()).post('/payments').set('Idempotency-Key', key).send({ amount: 1 });

  it('takes a listener class from the container (a provider of the app, so it can inject)', async () => {
    const app = await start(adapter, {
      imports: [IdempotencyModule.forRoot({ events: Recorder })],
      controllers: [TestController],
      providers: [Runs, Gate, Recorder],
    });
    Recorder.events.length = 0;
    await post(app, newKey());
    await until(() => Recorder.events.length === 1);
    expect(Recorder.events[0]).toMatchObject({ outcome: 'executed', runsSoFar: 1 });
  });

  it('is isolated: a listener that throws or rejects is logged (once a minute), the request unaffected', async () => {
    let calls = 0;
    const app = await start(adapter, {
      imports: [
        IdempotencyModule.forRoot({
          events: (event) => {
            calls++;
            if (event.outcome === 'executed') throw new Error('listener bug');
            return Promise.reject(new Error('listener rejects'));
          },
        }),
      ],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    const key = newKey();
    expect((await post(app, key)).status).toBe(201);
    expect((await post(app, key)).headers['idempotent-replayed']).toBe('true');
    await until(() => calls === 2);
    await sleep(20);
    expect(logs.errors.mock.calls.map(([line]: unknown[]) => line)).toEqual([
      'the idempotency events listener failed (requests are not affected; logged at most once a minute): listener bug',
    ]);
  });

  it('reports a record InMemoryStore evicts to make room as evicted, with the key hash', async () => {
    const seen: IdempotencyEvent[] = [];
    const app = await start(adapter, {
      imports: [IdempotencyModule.forRoot({ store: new InMemoryStore({ maxEntries: 2 }), events: (e) => void seen.push(e) })],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    const keys = [newKey(), newKey(), newKey()];
    for (const key of keys) expect((await post(app, key)).status).toBe(201);
    await until(() => seen.some((e) => e.outcome === 'evicted'));
    expect(seen.filter((e) => e.outcome === 'evicted')).toEqual([
      expect.objectContaining({ route: undefined, method: undefined, keyHash: sha256(keys[0]), store: 'InMemoryStore' }),
    ]);
  });

  it('never waits for a slow listener: responses go out while its promises are unsettled', async () => {
    const unsettled: (() => void)[] = [];
    const app = await start(adapter, {
      imports: [IdempotencyModule.forRoot({ events: () => new Promise<void>((resolve) => void unsettled.push(resolve)) })],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    for (let i = 0; i < 5; i++) expect((await post(app, newKey())).status).toBe(201);
    await until(() => unsettled.length === 5);
    for (const resolve of unsettled) resolve();
  });
});
