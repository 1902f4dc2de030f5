import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { IdempotencyModule, SqliteStore } from '../../lib/index.js';
import { ADAPTERS, useApps } from '../support/app.js';
import { DurableController, sha256 } from '../support/durable.js';
import { Gate, Runs } from '../support/fixtures.js';
import { spyOnLogger } from '../support/logger.js';
import { sleep, until } from '../support/timing.js';

let dir: string;
let files = 0;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'idem-sqlite-prod-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const newFile = () => join(dir, `prod-${++files}.db`);

describe.each(ADAPTERS)('SqliteStore on production days, on %s', (adapter) => {
  const start = useApps();
  const logs = spyOnLogger();
  const app = async (filename: string, options: { maxResponseBytes?: number } = {}) =>
    start(adapter, {
      imports: [IdempotencyModule.forRoot({ store: new SqliteStore({ filename }), ...options })],
      controllers: [DurableController],
      providers: [Runs, Gate],
    });

  // H17 (issue 22 item 2): a large response is stored and replayed; one past maxResponseBytes keeps a
  // small response-too-large record, and the handler never runs again.
  it('replays a 20 MB response byte for byte; one over maxResponseBytes answers response-too-large, never runs twice', async () => {
    const a = await app(newFile(), { maxResponseBytes: 32 * 1024 * 1024 });
    const post = (key: string, mb: number) =>
      request(a.getHttpServer()).post('/durable/big').set('Idempotency-Key', key).send({ mb });
    const first = await post('big-20', 20);
    expect(first.status).toBe(201);
    expect(first.text.length).toBeGreaterThan(20_000_000);
    const retry = await post('big-20', 20);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(sha256(retry.text)).toBe(sha256(first.text));
    const over = await post('big-40', 40);
    expect(over.status).toBe(201);
    expect(over.text.length).toBeGreaterThan(40_000_000);
    const refused = await post('big-40', 40);
    expect(refused.status).toBe(201);
    expect(refused.headers['idempotent-replayed']).toBe('true');
    expect(refused.body).toEqual({
      error:
        'the request with this key was processed, but its response was over 33554432 bytes and was not kept, so it cannot be sent again',
    });
    expect(a.get(Runs).of('big')).toBe(2);
  }, 120_000);

  // H20 (item 5) and H21 (item 6): another process holds the write lock past the busy timeout while a
  // handler finishes. The commit failed once ("database is locked") and after the lease the handler ran
  // again; and better-sqlite3's busy wait stalled every other request of the process meanwhile.
  it('a commit blocked by another writer is retried until it lands; the event loop is free meanwhile', async () => {
    const filename = newFile();
    const a = await app(filename);
    const server = a.getHttpServer();
    const gate = a.get(Gate);
    const { answer } = await gate.hold(() => request(server).post('/durable/held').set('Idempotency-Key', 'locked'));
    const other = new Database(filename);
    other.pragma('busy_timeout = 0');
    other.exec('BEGIN IMMEDIATE');
    try {
      gate.release();
      const first = await answer;
      expect(first.status).toBe(201);
      await until(
        () => logs.warnings.mock.calls.some((c: unknown[]) => String(c[0]).includes('commit failed, retrying')),
        10_000,
      );
      // A claim of another key waits for the lock asynchronously: a plain route answers first.
      const order: string[] = [];
      const waiting = request(server)
        .post('/durable/held')
        .set('Idempotency-Key', 'other')
        .then((r) => order.push(`claim ${r.status}`));
      await request(server)
        .get('/durable/ping')
        .then((r) => order.push(`ping ${r.status}`));
      await waiting;
      expect(order).toEqual(['ping 200', 'claim 503']);
      // Meanwhile a retry cannot even read the key (the lock): 503, never a second run.
      expect((await request(server).post('/durable/held').set('Idempotency-Key', 'locked')).status).toBe(503);
      expect(a.get(Runs).of('held')).toBe(1);
    } finally {
      other.exec('COMMIT');
      other.close();
    }
    let retry = await request(server).post('/durable/held').set('Idempotency-Key', 'locked');
    for (let i = 0; i < 100 && retry.status === 409; i++) {
      await sleep(100);
      retry = await request(server).post('/durable/held').set('Idempotency-Key', 'locked');
    }
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(a.get(Runs).of('held')).toBe(1);
    expect(logs.errors).not.toHaveBeenCalledWith(expect.stringContaining('response not stored'));
  }, 60_000);
});

// H22 (item 7): with createSchema: false and no table (or a table the store cannot work with) the app
// started, health said up, and every request got 503, or a first response was stored and every retry 503.
describe('SqliteStore refuses a table it cannot work with', () => {
  const cases: [string, string, string][] = [
    ['no table', '', 'the table does not exist'],
    [
      'no primary key on key',
      'CREATE TABLE idempotency_records (key TEXT, fingerprint TEXT NOT NULL, state INTEGER NOT NULL, owner TEXT, expires_at INTEGER NOT NULL, record BLOB)',
      'column key is not its primary key',
    ],
    [
      'record as TEXT',
      'CREATE TABLE idempotency_records (key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, state INTEGER NOT NULL, owner TEXT, expires_at INTEGER NOT NULL, record TEXT)',
      'column record is TEXT, not BLOB',
    ],
    [
      'a missing column',
      'CREATE TABLE idempotency_records (key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, state INTEGER NOT NULL, expires_at INTEGER NOT NULL, record BLOB)',
      'column owner (TEXT) is missing',
    ],
  ];
  it.each(cases)('%s: open() fails naming what differs', async (_, ddl, problem) => {
    const filename = newFile();
    const db = new Database(filename);
    if (ddl) db.exec(ddl);
    db.close();
    const store = new SqliteStore({ filename, createSchema: false });
    await expect(store.open()).rejects.toThrow(
      `SqliteStore: table "idempotency_records" is not what this release needs: ${problem}`,
    );
    await store.close();
  });

  it('ping() (the health check) fails once the table is gone', async () => {
    const filename = newFile();
    const store = new SqliteStore({ filename });
    await store.open();
    await store.ping();
    const db = new Database(filename);
    db.exec('DROP TABLE idempotency_records');
    db.close();
    await expect(store.ping()).rejects.toThrow('the table does not exist');
    await store.close();
  });
});
