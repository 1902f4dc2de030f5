import { afterAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type IdempotencyStore, SqliteStore } from '../../lib/index.js';
import { sampleRecord, storeContract } from '../support/store-contract.js';
import { until } from '../support/timing.js';

const dir = mkdtempSync(join(tmpdir(), 'idem-sqlite-'));
const opened: SqliteStore[] = [];
afterAll(async () => {
  await Promise.all(opened.map((s) => s.close()));
  rmSync(dir, { recursive: true, force: true });
});

function store(options: ConstructorParameters<typeof SqliteStore>[0]): SqliteStore {
  const s = new SqliteStore(options);
  opened.push(s);
  return s;
}

storeContract(
  'SqliteStore (file)',
  async () => {
    const s = store({ filename: join(dir, 'contract.db') });
    await s.open();
    return s;
  },
  undefined,
  undefined,
  // Another process's store: a connection of its own to the same file.
  async () => {
    const s = store({ filename: join(dir, 'contract.db') });
    await s.open();
    return s;
  },
);
storeContract('SqliteStore (:memory:)', async () => store({ filename: ':memory:' }));
const appDb = new Database(join(dir, 'app.db'));
storeContract(
  'SqliteStore (the application database)',
  async () => store({ database: appDb }),
  undefined,
  async (_, key, value, ttlMs) =>
    void appDb
      .prepare(
        `INSERT INTO idempotency_records (key, fingerprint, state, owner, expires_at, record) VALUES (?, 'fp-future', 1, NULL, ?, ?)`,
      )
      .run(key, Date.now() + ttlMs, value),
);

const claim = (owner: string, leaseMs = 1000) => ({ owner, fingerprint: 'fp', leaseMs });

describe('SqliteStore', () => {
  it('refuses bad options, naming them', () => {
    expect(() => new SqliteStore({})).toThrow(
      'SqliteStore: give exactly one of filename (a database of its own) and database (yours)',
    );
    expect(() => new SqliteStore({ filename: 'a', database: new Database(':memory:') })).toThrow('give exactly one of filename');
    expect(() => new SqliteStore({ filename: 'a', tableName: 'x; DROP' })).toThrow(
      'SqliteStore: tableName must be an SQL identifier: a letter or _, then letters, digits or _, at most 63 in all',
    );
    expect(() => new SqliteStore({ filename: 'a', tableNme: 'x' } as never)).toThrow(
      'SqliteStore: unknown option "tableNme" (did you mean tableName?)',
    );
    expect(() => new SqliteStore({ filename: 'a', sweepIntervalMs: -1 })).toThrow(
      'sweepIntervalMs must be an integer from 0 to 2147483647',
    );
    expect(() => new SqliteStore(null as never)).toThrow('SqliteStore: options must be an object');
    expect(() => new SqliteStore('idempotency.db' as never)).toThrow('SqliteStore: options must be an object');
  });

  it('closes quietly while, or after, its file could not be opened', async () => {
    const s = new SqliteStore({ filename: join(dir, 'no such folder', 'x.db') });
    await expect(s.open()).rejects.toThrow();
    await expect(s.close()).resolves.toBeUndefined();
    const opening = s.open();
    await expect(s.close()).resolves.toBeUndefined();
    await expect(opening).rejects.toThrow();
  });

  it('opens its file in WAL mode with a busy timeout, and creates the table and index', async () => {
    const s = store({ filename: join(dir, 'wal.db'), busyTimeoutMs: 250 });
    await s.open();
    const db = new Database(join(dir, 'wal.db'));
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    const names = (
      db.prepare("SELECT name FROM sqlite_master WHERE tbl_name = 'idempotency_records'").all() as { name: string }[]
    ).map((r) => r.name);
    expect(names).toEqual(expect.arrayContaining(['idempotency_records', 'idempotency_records_expires_at']));
    db.close();
  });

  it("syncs the log at checkpoints unless told 'full'; leaves an application's database as it is", async () => {
    const connection = (s: SqliteStore) => (s as unknown as { db: Database.Database }).db;
    const normal = store({ filename: join(dir, 'normal.db') });
    await normal.open();
    expect(connection(normal).pragma('synchronous', { simple: true })).toBe(1);
    const told = store({ filename: join(dir, 'told.db'), synchronous: 'normal' });
    await told.open();
    expect(connection(told).pragma('synchronous', { simple: true })).toBe(1);
    const full = store({ filename: join(dir, 'full.db'), synchronous: 'full' });
    await full.open();
    expect(connection(full).pragma('synchronous', { simple: true })).toBe(2);
    await full.claim('k', claim('a'));
    expect(await full.commit('k', 'a', sampleRecord('fp'), 5000)).toBe(true);
    const database = new Database(':memory:');
    database.pragma('synchronous = OFF');
    await store({ database }).open();
    expect(database.pragma('synchronous', { simple: true })).toBe(0);
    database.close();
    expect(() => new SqliteStore({ filename: 'a', synchronous: 'off' } as never)).toThrow(
      "SqliteStore: synchronous must be 'full' or 'normal', got the string 'off'",
    );
  });

  it('with createSchema: false creates nothing; the schemaSql() it shows is what it needs', async () => {
    const database = new Database(':memory:');
    const s = store({ database, createSchema: false, tableName: 'idem_keys' });
    // The message, not toThrow: better-sqlite3's native part keeps the error class of the first test
    // file that loaded it, which is not an Error of this file's realm.
    const failure = await s.claim('k', claim('a')).then(
      () => 'no error',
      (err: Error) => err.message,
    );
    expect(failure).toMatch(/SqliteStore: table "idem_keys" is not what this release needs: the table does not exist/);
    database.exec(s.schemaSql());
    expect(await s.claim('k', claim('a'))).toEqual({ state: 'claimed' });
  });

  it('the shipped migration sql/sqlite/001, applied to the database, is all a store with createSchema: false needs', async () => {
    const database = new Database(join(dir, 'migrated.db'));
    database.exec(readFileSync('sql/sqlite/001_idempotency_records.sql', 'utf8'));
    const s = store({ database, createSchema: false });
    await s.open(); // verifies the table
    expect(await s.claim('k', claim('a'))).toEqual({ state: 'claimed' });
    expect(await s.commit('k', 'a', sampleRecord('fp'), 10_000)).toBe(true);
    expect((await s.claim('k', claim('b'))).state).toBe('completed');
  });

  it('uses its clock for leases and records, and the sweep deletes expired rows only', async () => {
    let now = 1_000_000;
    const database = new Database(':memory:');
    const s = store({ database, now: () => now, sweepIntervalMs: 0 });
    expect(await s.claim('lease', claim('a', 100))).toEqual({ state: 'claimed' });
    expect(await s.claim('kept', claim('b', 100))).toEqual({ state: 'claimed' });
    expect(await s.commit('kept', 'b', sampleRecord('fp'), 10_000)).toBe(true);
    now += 99;
    expect((await s.claim('lease', claim('c'))).state).toBe('in-flight');
    now += 1;
    // Its lease ended: the sweep deletes the claim, and with it what its late owner could renew.
    expect(await s.sweep()).toBe(1);
    const rows = database.prepare('SELECT key FROM idempotency_records ORDER BY key').all();
    expect(rows).toEqual([{ key: 'kept' }]);
    expect(await s.renew('lease', 'a', 100)).toBe(false);
    expect(await s.claim('lease', claim('c'))).toEqual({ state: 'claimed' });
    now += 10_000;
    expect(await s.sweep()).toBe(2);
  });

  it("a lapsed claim nobody took is still its owner's: renewed, released, committed; taken, it is not", async () => {
    let now = 1_000_000;
    const s = store({ database: new Database(':memory:'), now: () => now, sweepIntervalMs: 0 });
    await s.claim('k', claim('late', 100));
    now += 150;
    expect(await s.renew('k', 'late', 100)).toBe(true);
    expect((await s.claim('k', claim('b'))).state).toBe('in-flight');
    now += 150;
    expect(await s.release('k', 'late')).toBe(true);
    await s.claim('k', claim('b', 100));
    now += 150;
    expect(await s.commit('k', 'b', sampleRecord('late'), 1_000)).toBe(true);
    expect((await s.claim('j', claim('slow', 100))).state).toBe('claimed');
    now += 150;
    expect((await s.claim('j', claim('next'))).state).toBe('claimed');
    expect(await s.renew('j', 'slow', 100)).toBe(false);
    expect(await s.commit('j', 'slow', sampleRecord('stale'), 1_000)).toBe(false);
    expect(await s.release('j', 'slow')).toBe(false);
  });

  it('sweeps by itself every sweepIntervalMs', async () => {
    let now = 1_000_000;
    const database = new Database(':memory:');
    const s = store({ database, now: () => now, sweepIntervalMs: 20 });
    expect(await s.claim('old', claim('a', 100))).toEqual({ state: 'claimed' });
    now += 1_000;
    const count = () => (database.prepare('SELECT count(*) AS n FROM idempotency_records').get() as { n: number }).n;
    await until(() => count() === 0);
    await s.close();
  });

  it('sweeps in batches of 1000', async () => {
    let now = 0;
    const database = new Database(':memory:');
    const s: IdempotencyStore & { sweep(): Promise<number> } = store({ database, now: () => now, sweepIntervalMs: 0 });
    for (let i = 0; i < 2500; i++) await s.claim(`k${i}`, claim('a', 10));
    now = 100;
    expect(await s.sweep()).toBe(2500);
  });

  it('a sweep runs as many batches as it needs (one read of the clock each), and ten at most', async () => {
    let now = 0;
    let reads = 0;
    const database = new Database(':memory:');
    const s = store({ database, now: () => (reads++, now), sweepIntervalMs: 0 });
    await s.open();
    const insert = database.prepare(`INSERT INTO idempotency_records VALUES (?, 'fp', 1, NULL, 10, NULL)`);
    database.transaction(() => {
      for (let i = 0; i < 10_500; i++) insert.run(`k${i}`);
    })();
    now = 100;
    reads = 0;
    expect(await s.sweep()).toBe(10_000);
    expect(reads).toBe(10);
    reads = 0;
    expect(await s.sweep()).toBe(500);
    expect(reads).toBe(1);
  });

  it("keeps the application's lock wait on the application's connection, before and after its own statements", async () => {
    const database = new Database(join(dir, 'lent.db'));
    database.pragma('busy_timeout = 5000');
    const s = store({ database });
    await s.open();
    expect(database.pragma('busy_timeout', { simple: true })).toBe(5000);
    expect(await s.claim('k', claim('a'))).toEqual({ state: 'claimed' });
    expect(await s.commit('k', 'a', sampleRecord('fp'), 10_000)).toBe(true);
    expect(database.pragma('busy_timeout', { simple: true })).toBe(5000);
    // The application changes its mind later: the store gives back the new setting, not the old one.
    database.pragma('busy_timeout = 3000');
    expect((await s.claim('k', claim('b'))).state).toBe('completed');
    expect(database.pragma('busy_timeout', { simple: true })).toBe(3000);
  });

  it("on the application's connection, waits for another writer asynchronously, not with the application's long wait", async () => {
    const file = join(dir, 'lent-busy.db');
    const database = new Database(file);
    database.pragma('journal_mode = WAL');
    // Long enough that a synchronous wait inside SQLite would outlast busyTimeoutMs and fail the claim.
    database.pragma('busy_timeout = 20000');
    const s = store({ database, busyTimeoutMs: 10_000 });
    await s.open();
    const holder = new Database(file);
    holder.exec('BEGIN IMMEDIATE');
    // The other writer lets go on a timer of this process: it can only fire while the event loop is free.
    setTimeout(() => holder.exec('COMMIT'), 100);
    expect(await s.claim('k', claim('a'))).toEqual({ state: 'claimed' });
    expect(database.pragma('busy_timeout', { simple: true })).toBe(20000);

    holder.exec('BEGIN IMMEDIATE');
    const quick = store({ database, busyTimeoutMs: 50 });
    const failure = await quick.claim('k2', claim('a')).then(
      () => 'claimed under a held lock',
      (err: { code?: string }) => err.code,
    );
    holder.exec('COMMIT');
    holder.close();
    expect(failure).toBe('SQLITE_BUSY');
    // Given back on the failure path too.
    expect(database.pragma('busy_timeout', { simple: true })).toBe(20000);
  }, 60_000);

  it('never closes a database it was given; closes its own', async () => {
    const database = new Database(':memory:');
    const given = new SqliteStore({ database });
    await given.open();
    await given.close();
    expect(database.open).toBe(true);
    const own = new SqliteStore({ filename: join(dir, 'own.db') });
    await own.claim('k', claim('a'));
    expect(existsSync(join(dir, 'own.db-wal'))).toBe(true);
    await own.close();
    // The last connection to a WAL file checkpoints it and removes the log as it closes.
    expect(existsSync(join(dir, 'own.db-wal'))).toBe(false);
    await own.close();
    // Closed for good: a late call (a release retried after shutdown) opens nothing again.
    const late = await own.claim('k', claim('b')).then(
      () => 'opened again',
      (err: Error) => err.message,
    );
    expect(late).toBe('the idempotency store is closed (the application is shutting down)');
  });
});
