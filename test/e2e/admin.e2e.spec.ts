import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import {
  IdempotencyAdmin,
  type IdempotencyEvent,
  IdempotencyModule,
  type IdempotencyStore,
  InMemoryStore,
  MySqlStore,
  SqliteStore,
} from '../../lib/index.js';
import { ADAPTERS, startApp } from '../support/app.js';
import { Gate, Runs, TestController } from '../support/fixtures.js';
import { spyOnLogger } from '../support/logger.js';
import { openStore, storeNames } from '../support/stores.js';
import { until } from '../support/timing.js';

let seq = 0;
const newKey = (): string => `adm-${Date.now()}-${++seq}`;

/** A record a later release wrote ("V9\n…"), put where the store keeps records. */
async function plantFutureRecord(cache: IdempotencyStore, key: string): Promise<void> {
  const value = Buffer.from('V9\nsealed-by-a-newer-release');
  const raw = cache as unknown as Record<string, (...args: unknown[]) => unknown>;
  if (cache instanceof InMemoryStore) {
    raw.insert.call(cache, key, value.toString('latin1'), 2, Infinity, 2);
  } else if (cache instanceof SqliteStore) {
    await raw.statements.call(cache);
    const db = (cache as unknown as { db: { prepare(sql: string): { run(...args: unknown[]): unknown } } }).db;
    db.prepare(`INSERT INTO idempotency_records VALUES (?, 'fp', 1, NULL, ?, ?)`).run(key, Number.MAX_SAFE_INTEGER, value);
  } else if (cache instanceof MySqlStore) {
    await raw.rows.call(cache, 1, `INSERT INTO idempotency_records VALUES (?, 'fp', 1, NULL, '9999-12-31 23:59:59.999', ?)`, [
      key,
      value,
    ]);
  } else {
    await raw.run.call(cache, 1, `INSERT INTO idempotency_records VALUES ($1, 'fp', 1, NULL, 'infinity', $2)`, [key, value]);
  }
}

const cases = storeNames('IdempotencyAdmin e2e').flatMap((store) => ADAPTERS.map((adapter) => [store, adapter] as const));

describe.each(cases)('IdempotencyAdmin on %s, %s', (storeName, adapter) => {
  let app: INestApplication;
  let admin: IdempotencyAdmin;
  let runs: Runs;
  let gate: Gate;
  const events: IdempotencyEvent[] = [];
  let cache: IdempotencyStore;
  const logs = spyOnLogger();
  beforeAll(async () => {
    ({ cache } = await openStore(storeName));
    app = await startApp(adapter, {
      // A short lease, renewed every 100 ms: a forgotten claim is noticed quickly.
      imports: [IdempotencyModule.forRoot({ store: cache, leaseMs: 300, events: (e) => void events.push(e) })],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    admin = app.get(IdempotencyAdmin);
    runs = app.get(Runs);
    gate = app.get(Gate);
  });
  afterAll(() => app.close());
  afterEach(() => gate.release());
  const post = (key: string, path = '/payments', headers: Record<string, string> = {}) =>
    request(app.getHttpServer()).post(path).set(headers).set('Idempotency-Key', key).send({ amount: 5 });

  it('inspects a completed key (no body unless asked) and forgets it: the next request runs the handler again', async () => {
    const key = newKey();
    expect((await post(key)).status).toBe(201);
    const info = await admin.inspect(key);
    expect(info).toMatchObject({ state: 'completed', status: 201, body: undefined, reason: undefined });
    // ETag describes the body: stored although @Header() set it before the handler ran (H26).
    expect(info!.headers).toEqual({ 'content-type': 'application/json; charset=utf-8', etag: '"v1"' });
    expect(info!.fingerprint).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const withBody = await admin.inspect(key, { body: true });
    expect(JSON.parse(withBody!.body!.toString())).toMatchObject({ key, body: { amount: 5 } });
    const before = runs.of('payments');
    expect(await admin.forget(key)).toBe(true);
    expect(await admin.inspect(key)).toBeUndefined();
    expect(await admin.forget(key)).toBe(false);
    const again = await post(key);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(runs.of('payments')).toBe(before + 1);
  });

  it('finds a scoped key only under its scope', async () => {
    const key = newKey();
    expect((await post(key, '/scoped', { 'x-user': 'acct:7' })).status).toBe(201);
    expect(await admin.inspect(key)).toBeUndefined();
    expect(await admin.inspect(key, { scope: 'acct:8' })).toBeUndefined();
    expect((await admin.inspect(key, { scope: 'acct:7' }))?.state).toBe('completed');
    expect(await admin.forget(key, { scope: 'acct:7' })).toBe(true);
    expect((await post(key, '/scoped', { 'x-user': 'acct:7' })).headers['idempotent-replayed']).toBeUndefined();
  });

  it('frees a stuck in-flight key: the held handler loses its lease (lease-lost) and its response is not stored', async () => {
    const key = newKey();
    const first = await gate.hold(() => post(key));
    expect(await admin.inspect(key)).toMatchObject({ state: 'in-flight', status: undefined });
    expect(await admin.forget(key)).toBe(true);
    await until(() => events.some((e) => e.outcome === 'lease-lost'));
    expect(events.find((e) => e.outcome === 'lease-lost')).toMatchObject({ route: 'TestController.create', method: 'POST' });
    gate.release();
    expect((await first.answer).status).toBe(201);
    await until(() => events.some((e) => e.outcome === 'not-stored'));
    expect(await admin.inspect(key)).toBeUndefined();
  });

  it('answers 503 with Retry-After for a record in a newer format, logs it, never runs the handler; forgetting it frees the key', async () => {
    const key = newKey();
    await plantFutureRecord(cache, `idem:%:${key}`);
    const before = runs.of('payments');
    const refused = await post(key);
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.body).toEqual({ error: 'the stored response for this key cannot be read at the moment; retry shortly' });
    expect(logs.errors).toHaveBeenCalledWith(
      "TestController.create: answering 503: the key's record is in format 9, written by a newer release (this one reads up to 2); it is neither replayed nor run again until the deploy is complete",
    );
    expect(runs.of('payments')).toBe(before);
    await until(() => events.some((e) => e.code === 'record-unreadable'));
    expect(events.find((e) => e.code === 'record-unreadable')).toMatchObject({ outcome: 'store-unavailable', status: 503 });
    expect(await admin.inspect(key)).toMatchObject({ state: 'unreadable', reason: expect.stringContaining('format 9') });
    expect(await admin.forget(key)).toBe(true);
    expect((await post(key)).status).toBe(201);
    expect(runs.of('payments')).toBe(before + 1);
  });

  it('refuses an empty key or scope', async () => {
    await expect(admin.inspect('')).rejects.toThrow(
      'IdempotencyAdmin: the key must be a non-empty string, as the client sent it',
    );
    await expect(admin.forget('k', { scope: '' })).rejects.toThrow(
      'IdempotencyAdmin: scope must be a non-empty string, as the identity resolver returns it',
    );
  });
});
