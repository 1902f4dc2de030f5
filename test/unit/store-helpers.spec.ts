import { afterEach, describe, expect, it, jest } from '@jest/globals';
import Database from 'better-sqlite3';
import { PostgresStore, SqliteStore } from '../../lib/index.js';
import type { PostgresPoolLike } from '../../lib/stores/postgres/postgres-store.options.js';
import { onSizedConnection, readRecordParts } from '../../lib/stores/postgres/postgres.large-records.js';
import { createPostgresSchema } from '../../lib/stores/postgres/postgres.verifier.js';
import { whileBusy } from '../../lib/stores/sqlite/sqlite.locks.js';
import { verifySqliteTable } from '../../lib/stores/sqlite/sqlite.verifier.js';

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
    const { work, calls } = failing(
      coded('SQLITE_BUSY'),
      coded('SQLITE_LOCKED'),
      coded('SQLITE_BUSY_SNAPSHOT'),
      coded('SQLITE_LOCKED_SHAREDCACHE'),
    );
    await expect(whileBusy(work, 5_000)).resolves.toBe('done');
    expect(calls()).toBe(5);
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

  it('refuses a key that is not the primary key alone: none, part of a composite one, or no key column at all', () => {
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
    const keyless = new Database(':memory:');
    keyless.exec(`CREATE TABLE t (id TEXT PRIMARY KEY, ${columns})`);
    expect(() => verifySqliteTable(keyless, 't')).toThrow(/key.*primary key/s);
    keyless.close();
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

describe('PostgreSQL large records: the sized connection and the part reads', () => {
  /** A pool whose one client records what it is sent, failing the statement that contains `failOn`. */
  const sizedPool = (failOn?: string) => {
    const sent: { text: string; values?: unknown[]; query_timeout?: number }[] = [];
    const released: unknown[] = [];
    const client = {
      query: async (config: { text: string; values?: unknown[]; query_timeout?: number }) => {
        sent.push(config);
        if (failOn && config.text.includes(failOn)) throw new Error(`refused: ${failOn}`);
        return { rows: [{ answered: config.text }] };
      },
      release: (err?: unknown) => void released.push(err),
    };
    const pool = { query: async () => ({ rows: [] }), connect: async () => client } as unknown as PostgresPoolLike;
    return { pool, sent, released };
  };

  it('scales the statement timeout to the size (8 MB/s), bounds the client slackMs later, resets it and returns the client', async () => {
    const { pool, sent, released } = sizedPool();
    const rows = await onSizedConnection(pool, 1_000, 500, 80_001, (sql) => sql.query('INSERT big', [1]));
    expect(rows).toEqual([{ answered: 'INSERT big' }]);
    expect(sent).toEqual([
      { text: 'SET statement_timeout = 1011' },
      { text: 'INSERT big', values: [1], query_timeout: 1511 },
      { text: 'RESET statement_timeout' },
    ]);
    expect(released).toEqual([undefined]);
  });

  it('never returns a connection whose timeout may still be the long one: a failed statement destroys it', async () => {
    const { pool, sent, released } = sizedPool('INSERT');
    await expect(onSizedConnection(pool, 1_000, 500, 10, (sql) => sql.query('INSERT big', []))).rejects.toThrow(
      'refused: INSERT',
    );
    expect(sent.map((s) => s.text)).toEqual(['SET statement_timeout = 1001', 'INSERT big']);
    expect(released).toEqual([expect.objectContaining({ message: 'refused: INSERT' })]);
  });

  /** An executor answering each part read with the next of `answers` (a row or none), recording the parameters. */
  const partReader = (...answers: (Buffer | undefined)[]) => {
    const asked: unknown[][] = [];
    const sql = {
      query: async (text: string, values?: unknown[]) => {
        expect(text).toContain('xmin::text = $4');
        asked.push(values ?? []);
        const part = answers.shift();
        return part ? [{ part }] : [];
      },
    };
    return { sql, asked };
  };

  it('reads a record in parts of 1 MiB of its row version, no part past the end', async () => {
    const mib = 1 << 20;
    const first = Buffer.alloc(mib, 1);
    const second = Buffer.alloc(mib, 2);
    const { sql, asked } = partReader(first, second, Buffer.alloc(0));
    const record = await readRecordParts(sql, '"t"', 'k', '42', 2 * mib);
    expect(record?.equals(Buffer.concat([first, second]))).toBe(true);
    expect(asked).toEqual([
      ['k', 1, mib, '42'],
      ['k', mib + 1, mib, '42'],
    ]);
  });

  it('is undefined when the row changed between two parts', async () => {
    const { sql, asked } = partReader(Buffer.alloc(1 << 20), undefined);
    await expect(readRecordParts(sql, '"t"', 'k', '42', (1 << 20) + 1)).resolves.toBeUndefined();
    expect(asked).toHaveLength(2);
  });
});
