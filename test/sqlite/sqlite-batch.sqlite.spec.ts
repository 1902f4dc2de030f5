import { afterAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SqliteDatabaseLike } from '../../lib/stores/index.js';
import { SqliteStore } from '../../lib/index.js';
import { SqliteBatch } from '../../lib/stores/sqlite/sqlite.batch.js';
import { sampleRecord } from '../support/store-contract.js';
import { tick } from '../support/timing.js';

const dir = mkdtempSync(join(tmpdir(), 'idem-sqlite-batch-'));
const closing: Array<{ close(): unknown }> = [];
afterAll(() => {
  for (const c of closing.reverse()) c.close();
  rmSync(dir, { recursive: true, force: true });
});

let files = 0;
/** A WAL file with a table `t`, the connection the batch writes on, and another one to look from. */
function database(): { db: Database.Database; other: Database.Database; file: string } {
  const file = join(dir, `b${files++}.db`);
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE t (k TEXT PRIMARY KEY)');
  const other = new Database(file);
  closing.push(db, other);
  return { db, other, file };
}

const direct = <T>(work: () => T): T => work();

/** The connection as the batch sees it, counting the transactions it begins. */
function counted(db: Database.Database): { db: SqliteDatabaseLike; begun: () => number } {
  let begun = 0;
  const seen: SqliteDatabaseLike = {
    prepare: (sql) => db.prepare(sql),
    exec: (sql) => db.exec(sql),
    pragma: (source, options) => db.pragma(source, options),
    close: () => db.close(),
    get inTransaction() {
      return db.inTransaction;
    },
    transaction: <A extends unknown[], R>(fn: (...args: A) => R) => {
      const tx = db.transaction(fn);
      return { immediate: (...args: A): R => (begun++, tx.immediate(...args)) };
    },
  };
  return { db: seen, begun: () => begun };
}
const count = (db: Database.Database): number => (db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;
const busy = (): Error => Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });

describe('SqliteBatch (group commit of one turn of the event loop)', () => {
  it('runs the work of one turn in one transaction, and answers only after it committed', async () => {
    const { db, other } = database();
    const { db: looked, begun } = counted(db);
    const batch = new SqliteBatch(looked, direct, 1_000);
    const insert = db.prepare('INSERT INTO t (k) VALUES (?)');
    const seen: Array<{ mine: number; theirs: number; open: boolean }> = [];
    const look = () => seen.push({ mine: count(db), theirs: count(other), open: db.inTransaction });
    const answers = await Promise.all([
      batch.run(() => insert.run('a').changes),
      batch.run(look),
      batch.run(() => insert.run('b').changes),
      batch.run(look),
    ]);
    // The second piece sees the first's row on the batch's connection, not yet on another one.
    expect(seen).toEqual([
      { mine: 1, theirs: 0, open: true },
      { mine: 2, theirs: 0, open: true },
    ]);
    expect(answers).toEqual([1, 1, 1, 2]);
    await tick(); // no other flush follows in this turn's check phase
    expect(begun()).toBe(1);
    expect(count(other)).toBe(2);
    // Work queued after that turn runs in a transaction of its own, which sees both rows committed.
    expect(await batch.run(() => [count(other), db.inTransaction])).toEqual([2, true]);
    expect(begun()).toBe(2);
    expect(db.inTransaction).toBe(false);
  });

  it("one piece's own error fails that piece only; the rest of its batch commits", async () => {
    const { db, other } = database();
    const batch = new SqliteBatch(db, direct, 1_000);
    const insert = db.prepare('INSERT INTO t (k) VALUES (?)');
    const results = await Promise.allSettled([
      batch.run(() => insert.run('a').changes),
      batch.run(() => insert.run('a').changes),
      batch.run(() => insert.run('b').changes),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason).toMatchObject({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
    expect(other.prepare('SELECT k FROM t ORDER BY k').pluck().all()).toEqual(['a', 'b']);
  });

  it('an error after which SQLite rolled the transaction back fails the whole batch, which left nothing', async () => {
    const { db, other } = database();
    const batch = new SqliteBatch(db, direct, 1_000);
    const insert = db.prepare('INSERT INTO t (k) VALUES (?)');
    const lost = new Error('rolled back under us');
    const results = await Promise.allSettled([
      batch.run(() => insert.run('a').changes),
      batch.run(() => {
        db.exec('ROLLBACK');
        throw lost;
      }),
      batch.run(() => insert.run('b').changes),
    ]);
    expect(results).toEqual([0, 1, 2].map(() => ({ status: 'rejected', reason: lost })));
    expect(count(other)).toBe(0);
    expect(db.inTransaction).toBe(false);
    // The next turn's batch works again.
    expect(await batch.run(() => insert.run('c').changes)).toBe(1);
  });

  it("waits out another connection's write lock without blocking the event loop, then runs every piece once", async () => {
    const { db, other } = database();
    db.pragma('busy_timeout = 0');
    const batch = new SqliteBatch(db, direct, 10_000);
    other.exec('BEGIN IMMEDIATE');
    // The other writer lets go on a timer of this process: it can only fire while the event loop is free.
    setTimeout(() => other.exec('COMMIT'), 100);
    let runs = 0;
    const insert = db.prepare('INSERT INTO t (k) VALUES (?)');
    const answers = await Promise.all(['a', 'b'].map((k) => batch.run(() => (runs++, insert.run(k).changes))));
    expect(answers).toEqual([1, 1]);
    expect(runs).toBe(2);
    expect(count(other)).toBe(2);
  });

  it('a lock error inside the batch rolls all of it back and runs all of it again', async () => {
    const { db, other } = database();
    const batch = new SqliteBatch(db, direct, 10_000);
    const insert = db.prepare('INSERT INTO t (k) VALUES (?)');
    let locked = 1;
    const runs: string[] = [];
    const answers = await Promise.all([
      batch.run(() => (runs.push('a'), insert.run('a').changes)),
      batch.run(() => {
        runs.push('lock');
        if (locked-- > 0) throw busy();
        return 'through';
      }),
    ]);
    expect(answers).toEqual([1, 'through']);
    // 'a' ran twice, but its first insert was rolled back: one row, no constraint error.
    expect(runs).toEqual(['a', 'lock', 'a', 'lock']);
    expect(count(other)).toBe(1);
  });

  it('a lock held past busyTimeoutMs fails every piece of the batch with the lock error', async () => {
    const { db, other } = database();
    db.pragma('busy_timeout = 0');
    const batch = new SqliteBatch(db, direct, 50);
    other.exec('BEGIN IMMEDIATE');
    let runs = 0;
    const results = await Promise.allSettled([batch.run(() => runs++), batch.run(() => runs++)]);
    other.exec('COMMIT');
    expect(results.map((r) => (r as PromiseRejectedResult).reason?.code)).toEqual(['SQLITE_BUSY', 'SQLITE_BUSY']);
    expect(runs).toBe(0);
  });

  it('runs the whole batch inside what the store lends it (the lock wait of an application connection)', async () => {
    const { db } = database();
    const lent: string[] = [];
    const briefly = <T>(work: () => T): T => {
      lent.push('lend');
      try {
        return work();
      } finally {
        lent.push('give back');
      }
    };
    const batch = new SqliteBatch(db, briefly, 1_000);
    await Promise.all([batch.run(() => lent.push('one')), batch.run(() => lent.push('two'))]);
    expect(lent).toEqual(['lend', 'one', 'two', 'give back']);
  });

  it('drained() waits for what is queued and for a batch under way', async () => {
    const { db, other } = database();
    db.pragma('busy_timeout = 0');
    const batch = new SqliteBatch(db, direct, 10_000);
    expect(await Promise.race([batch.drained().then(() => 'drained'), new Promise((r) => setImmediate(r, 'waiting'))])).toBe(
      'drained',
    );
    other.exec('BEGIN IMMEDIATE');
    setTimeout(() => other.exec('COMMIT'), 100);
    const insert = db.prepare('INSERT INTO t (k) VALUES (?)');
    let done = false;
    void batch.run(() => insert.run('a')).then(() => (done = true));
    await batch.drained();
    expect(done).toBe(true);
    expect(count(other)).toBe(1);
  });
});

describe('SqliteStore on its batch', () => {
  it('claims, commits and releases of one turn commit together; a duplicate claim in the same turn is held', async () => {
    const { file, other } = database();
    const s = new SqliteStore({ filename: file });
    await s.open();
    const claim = (owner: string) => ({ owner, fingerprint: 'fp', leaseMs: 10_000 });
    const [a, b, dup] = await Promise.all([s.claim('a', claim('1')), s.claim('b', claim('2')), s.claim('a', claim('3'))]);
    expect([a, b]).toEqual([{ state: 'claimed' }, { state: 'claimed' }]);
    expect(dup).toMatchObject({ state: 'in-flight', fingerprint: 'fp' });
    expect(
      await Promise.all([
        s.commit('a', '1', sampleRecord('fp'), 10_000),
        s.release('b', '2'),
        s.commit('b', '2', sampleRecord('fp'), 10_000),
      ]),
    ).toEqual([true, true, false]);
    expect(other.prepare('SELECT key, state FROM idempotency_records').all()).toEqual([{ key: 'a', state: 1 }]);
    await s.close();
  });

  it('close() lets the work already asked for finish first', async () => {
    const { file, other } = database();
    const s = new SqliteStore({ filename: file });
    await s.open();
    const claimed = s.claim('k', { owner: 'o', fingerprint: 'fp', leaseMs: 10_000 });
    await s.close();
    expect(await claimed).toEqual({ state: 'claimed' });
    expect(other.prepare('SELECT count(*) AS n FROM idempotency_records').pluck().get()).toBe(1);
  });
});
