import { afterEach, describe, expect, it, jest } from '@jest/globals';
import Database from 'better-sqlite3';
import { PostgresStore, SqliteStore } from '../../lib/index.js';
import type { PostgresPoolLike } from '../../lib/stores/postgres-store.options.js';
import { createPostgresSchema } from '../../lib/stores/postgres.verifier.js';
import { whileBusy } from '../../lib/stores/sqlite.locks.js';
import { verifySqliteTable } from '../../lib/stores/sqlite.verifier.js';

afterEach(() => {
  jest.restoreAllMocks();
});

const coded = (code: unknown) => Object.assign(new Error(String(code)), { code });

describe('whileBusy (SQLite lock waits)', () => {
  /** Work that fails with each of `errors` in turn, then answers 'done'. */
  const failing = (...errors: unknown[]) => {
    let calls = 0;
    const work = () => {
      if (calls < errors.length) throw errors[calls++];
      calls++;
      return 'done';
    };
    return { work, calls: () => calls };
  };

  it('tries again while another connection holds the lock: SQLITE_BUSY, SQLITE_LOCKED and their extended codes', async () => {
    const { work, calls } = failing(coded('SQLITE_BUSY'), coded('SQLITE_LOCKED'), coded('SQLITE_BUSY_SNAPSHOT'));
    await expect(whileBusy(work, 5_000)).resolves.toBe('done');
    expect(calls()).toBe(4);
  });

  it('throws any other error at once, whatever carries it', async () => {
    for (const err of [coded('SQLITE_CONSTRAINT'), coded('X_SQLITE_BUSY'), coded(5), new Error('SQLITE_BUSY'), null]) {
      const { work, calls } = failing(err);
      await expect(whileBusy(work, 5_000)).rejects.toBe(err);
      expect(calls()).toBe(1);
    }
  });

  it('pauses 1, 2, 4 … ms, doubling up to 50, and gives up once the next pause would pass busyTimeoutMs', async () => {
    const pauses: number[] = [];
    let now = 1_000;
    jest.spyOn(Date, 'now').mockImplementation(() => now);
    jest.spyOn(globalThis, 'setTimeout').mockImplementation(((fn: () => void, ms: number) => {
      pauses.push(ms);
      now += ms;
      fn();
      return 0 as unknown as NodeJS.Timeout;
    }) as typeof setTimeout);
    const busy = coded('SQLITE_BUSY');
    const work = () => {
      now += 1;
      throw busy;
    };
    await expect(whileBusy(work, 200)).rejects.toBe(busy);
    expect(pauses).toEqual([1, 2, 4, 8, 16, 32, 50, 50]);
    // Each try moves the clock by 1 ms: the last pause is the one that still ends before the deadline.
    const spent = pauses.reduce((a, b) => a + b, 0) + pauses.length + 1;
    expect(spent).toBeLessThanOrEqual(200);
    expect(spent + 50).toBeGreaterThan(200);
  });

  it('with no time to wait, a locked statement fails at once', async () => {
    const busy = coded('SQLITE_BUSY');
    const { work, calls } = failing(busy);
    await expect(whileBusy(work, 0)).rejects.toBe(busy);
    expect(calls()).toBe(1);
  });
});

describe('verifySqliteTable', () => {
  const columns = `fingerprint TEXT NOT NULL, state INTEGER NOT NULL, owner TEXT, expires_at INTEGER NOT NULL, record BLOB`;

  it('refuses a key that is not the primary key alone: none, or part of a composite one', () => {
    for (const ddl of [
      `CREATE TABLE t (key TEXT, ${columns})`,
      `CREATE TABLE t (key TEXT, ${columns}, PRIMARY KEY (key, owner))`,
      `CREATE TABLE t (key TEXT, ${columns}, PRIMARY KEY (owner, key))`,
    ]) {
      const db = new Database(':memory:');
      db.exec(ddl);
      expect(() => verifySqliteTable(db, 't')).toThrow('primary key');
      db.close();
    }
    const good = new Database(':memory:');
    good.exec(`CREATE TABLE t (key TEXT PRIMARY KEY, ${columns})`);
    expect(() => verifySqliteTable(good, 't')).not.toThrow();
    good.close();
  });
});

describe('createPostgresSchema', () => {
  const pool = (failures: number) => {
    let calls = 0;
    const query = jest.fn(async () => {
      if (calls++ < failures) throw new Error(`race ${calls}`);
      return { rows: [], rowCount: 0 };
    });
    return { query, end: async () => undefined, on: () => undefined } as unknown as PostgresPoolLike & { query: typeof query };
  };

  it('tries a lost race again after 50 and 100 ms, and the third failure fails the start with its cause', async () => {
    const pauses: number[] = [];
    jest.spyOn(globalThis, 'setTimeout').mockImplementation(((fn: () => void, ms: number) => {
      pauses.push(ms);
      fn();
      return 0 as unknown as NodeJS.Timeout;
    }) as typeof setTimeout);
    const twice = pool(2);
    await expect(createPostgresSchema(twice, 'DDL')).resolves.toBeUndefined();
    expect(twice.query).toHaveBeenCalledTimes(3);
    expect(pauses).toEqual([50, 100]);
    const thrice = pool(3);
    const err = (await createPostgresSchema(thrice, 'DDL').catch((e: unknown) => e)) as Error;
    expect(err.message).toBe('PostgresStore: the schema could not be created: race 3');
    expect((err.cause as Error).message).toBe('race 3');
    expect(thrice.query).toHaveBeenCalledTimes(3);
  });
});

describe('the SQL stores check their options when constructed', () => {
  it('PostgresStore', () => {
    expect(() => new PostgresStore(null as never)).toThrow('PostgresStore: options must be an object');
    expect(() => new PostgresStore('postgres://x' as never)).toThrow('PostgresStore: options must be an object');
    expect(() => new PostgresStore({ connectionString: 'postgres://x', poolSize: 0 })).toThrow(
      'PostgresStore: poolSize must be an integer from 1 to 1000, got 0',
    );
    expect(() => new PostgresStore({ connectionString: 'postgres://x', sweepIntervalMs: -1 })).toThrow(
      'PostgresStore: sweepIntervalMs must be an integer from 0 to 2147483647, got -1',
    );
  });

  it('SqliteStore', () => {
    expect(() => new SqliteStore(null as never)).toThrow('SqliteStore: options must be an object');
    expect(() => new SqliteStore({ filename: ':memory:', busyTimeoutMs: -1 })).toThrow(
      'SqliteStore: busyTimeoutMs must be an integer from 0 to 2147483647, got -1',
    );
  });
});
