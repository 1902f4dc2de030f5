import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createRequire } from 'node:module';
import pg from 'pg';
import { DataSource, type MigrationInterface, type QueryRunner } from 'typeorm';
import type { PostgresPoolLike } from '../../lib/stores/index.js';
import { PostgresStore } from '../../lib/index.js';
import { encodeRecord } from '../../lib/stores/shared/store-value.codec.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { sampleRecord, storeContract } from '../support/store-contract.js';
import { sleep, until } from '../support/timing.js';

const describePg = postgresAvailable('PostgreSQL store suite') ? describe : describe.skip;

let server: PostgresServer;
let databases = 0;
const stores: PostgresStore[] = [];
const pools: pg.Pool[] = [];

/** A database of its own for each store, so no test sees another's rows. */
async function database(): Promise<string> {
  return server.createDatabase(`store_${process.pid}_${++databases}`);
}
async function ownStore(options: Partial<ConstructorParameters<typeof PostgresStore>[0]> = {}): Promise<PostgresStore> {
  const store = new PostgresStore({ connectionString: await database(), ...options });
  stores.push(store);
  await store.open();
  return store;
}
function pool(url: string): pg.Pool {
  const p = new pg.Pool({ connectionString: url, max: 4 });
  p.on('error', () => undefined);
  pools.push(p);
  return p;
}

/** A pool that counts the statements it runs: what the round-trip targets are measured with. */
function counted(inner: pg.Pool): PostgresPoolLike & { count: number } {
  const wrapper = {
    count: 0,
    query: (config: { text: string; values?: unknown[] }) => {
      wrapper.count++;
      return inner.query(config) as never;
    },
    end: () => inner.end(),
    on: (event: 'error', listener: (err: Error) => void) => inner.on(event, listener),
  };
  return wrapper;
}

const claim = (owner: string, fingerprint = 'fp', leaseMs = 5000) => ({ owner, fingerprint, leaseMs });

/** A claim whose lease has ended, its row locked by another connection (returned, in its transaction). */
async function lockedExpiredClaim(store: PostgresStore, url: string, key: string): Promise<pg.Client> {
  await store.open();
  await store.claim(key, claim('a', 'fp', 50));
  await sleep(80);
  const other = new pg.Client({ connectionString: url });
  await other.connect();
  await other.query('BEGIN');
  await other.query('SELECT * FROM idempotency_records WHERE key = $1 FOR UPDATE', [key]);
  return other;
}

describePg('PostgresStore', () => {
  beforeAll(async () => {
    server = await PostgresServer.start();
  }, 60_000);
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await Promise.all(pools.map((p) => p.end()));
    await server?.destroy();
  });

  let contractUrl: string | undefined;
  storeContract(
    'PostgresStore (its own pool)',
    async () => {
      contractUrl = await database();
      const store = new PostgresStore({ connectionString: contractUrl });
      stores.push(store);
      await store.open();
      return store;
    },
    undefined,
    async (store, key, value, ttlMs) => {
      // As a newer release would commit it: a record row.
      await (store as unknown as { run: (lane: number, text: string, values: unknown[]) => Promise<unknown> }).run(
        1,
        `INSERT INTO "public"."idempotency_records" (key, fingerprint, state, owner, expires_at, record)
       VALUES ($1, 'fp-future', 1, NULL, clock_timestamp() + $2::bigint * interval '1 millisecond', $3)`,
        [key, ttlMs, value],
      );
    },
    // Another pod's store: a pool of its own on the same database.
    async () => {
      const store = new PostgresStore({ connectionString: contractUrl! });
      stores.push(store);
      await store.open();
      return store;
    },
  );
  storeContract('PostgresStore (the application pool, another schema and table)', async () => {
    const store = new PostgresStore({ pool: pool(await database()), schema: 'billing', tableName: 'idem_keys' });
    stores.push(store);
    return store;
  });

  it('refuses bad options, naming them', () => {
    expect(() => new PostgresStore({})).toThrow(
      'PostgresStore: give exactly one of connectionString (a pool of its own) and pool (yours)',
    );
    expect(() => new PostgresStore({ connectionString: 'x', schema: 'a"b' })).toThrow(
      'PostgresStore: schema must be an SQL identifier',
    );
    expect(() => new PostgresStore({ connectionString: 'x', tableName: '1x' })).toThrow(
      'PostgresStore: tableName must be an SQL identifier',
    );
    expect(() => new PostgresStore({ connectionString: 'x', statementTimeoutMs: 0 })).toThrow(
      'PostgresStore: statementTimeoutMs must be an integer from 1 to 2147483647, got 0',
    );
    expect(() => new PostgresStore({ connectionString: 'x', poolsize: 3 } as never)).toThrow(
      'PostgresStore: unknown option "poolsize" (did you mean poolSize?)',
    );
  });

  it('costs 2 round trips for a first request, 1 for a replay, 1 for a conflict', async () => {
    const p = counted(pool(await database()));
    const store = new PostgresStore({ pool: p, sweepIntervalMs: 0 });
    stores.push(store);
    await store.open();
    p.count = 0;
    await store.claim('k', claim('a'));
    await store.commit('k', 'a', sampleRecord('fp'), 5000);
    expect(p.count).toBe(2);
    p.count = 0;
    expect((await store.claim('k', claim('b'))).state).toBe('completed');
    expect(p.count).toBe(1);
    await store.claim('busy', claim('a'));
    p.count = 0;
    expect((await store.claim('busy', claim('b'))).state).toBe('in-flight');
    expect(p.count).toBe(1);
  });

  it('claims, and commits, that wait for a connection go to the database together, each answered as if alone; two of one key: one claims', async () => {
    const p = counted(pool(await database()));
    const store = new PostgresStore({ pool: p, sweepIntervalMs: 0 });
    stores.push(store);
    await store.open();
    // Every batch sends its keys sorted: batches that share keys lock them in one order.
    const batched: string[][] = [];
    const inner = p.query;
    p.query = (config) => {
      if (config.text.includes('unnest')) batched.push(config.values![0] as string[]);
      return inner(config);
    };
    await store.claim('done', claim('a'));
    await store.commit('done', 'a', sampleRecord('fp'), 60_000);
    await store.claim('running', claim('a', 'other'));
    p.count = 0;
    // 40 claims at once on a pool of 4 (3 connections for claims): new keys, a key twice, a replay, a conflict.
    const keys = [...Array.from({ length: 36 }, (_, i) => `new-${39 - i}`), 'twice', 'twice', 'done', 'running'];
    const outcomes = await Promise.all(keys.map((key, i) => store.claim(key, claim(`o${i}`))));
    expect(p.count).toBeLessThan(keys.length / 4);
    expect(outcomes.slice(0, 36)).toEqual(Array.from({ length: 36 }, () => ({ state: 'claimed' })));
    // The first asked of the two claims the key (the batch keeps their order among equal keys).
    expect(outcomes.slice(36, 38)).toEqual([{ state: 'claimed' }, { state: 'in-flight', fingerprint: 'fp' }]);
    expect(await store.commit('twice', 'o36', sampleRecord('fp'), 60_000)).toBe(true);
    expect(outcomes[38]).toEqual({ state: 'completed', record: sampleRecord('fp') });
    expect(outcomes[39]).toEqual({ state: 'in-flight', fingerprint: 'other' });
    // Commits that wait together go together too, each fenced by its own owner: o5 holds new-34 alone.
    p.count = 0;
    const commits = await Promise.all([
      ...keys.slice(0, 36).map((key, i) => store.commit(key, `o${i}`, sampleRecord(`fp-${key}`), 60_000)),
      store.commit('running', 'o5', sampleRecord('fp'), 60_000),
      store.commit('twice', 'nobody', sampleRecord('fp'), 60_000),
    ]);
    expect(p.count).toBeLessThan(38 / 4);
    expect(commits).toEqual([...Array.from({ length: 36 }, () => true), false, false]);
    for (const key of ['new-39', 'new-21', 'new-4']) {
      expect(await store.claim(key, claim('late'))).toEqual({ state: 'completed', record: sampleRecord(`fp-${key}`) });
    }
    expect(await store.claim('running', claim('late'))).toEqual({ state: 'in-flight', fingerprint: 'other' });
    expect(batched.length).toBeGreaterThanOrEqual(2);
    for (const keysSent of batched) expect(keysSent).toEqual([...keysSent].sort());
  });

  it('a batch keeps its statement small: a record over 64 KiB is committed alone, one over 32 KiB read in parts after the batch', async () => {
    const p = counted(pool(await database()));
    const store = new PostgresStore({ pool: p, sweepIntervalMs: 0 });
    stores.push(store);
    await store.open();
    const record = (fingerprint: string, bytes: number) => {
      const base = sampleRecord(fingerprint);
      return { ...base, response: { ...base.response, body: Buffer.alloc(bytes, fingerprint) } };
    };
    // The first four commits start at once, alone: the medium and large ones come last and wait.
    const sizes: Record<string, number> = {};
    for (let i = 0; i < 10; i++) sizes[`small-${i}`] = 100;
    Object.assign(sizes, { medium: 40 * 1024, large: 200 * 1024 });
    const keys = Object.keys(sizes);
    await Promise.all(keys.map((key) => store.claim(key, claim('a'))));
    const statements: { text: string; values?: unknown[] }[] = [];
    const inner = p.query;
    p.query = (config) => (statements.push(config), inner(config));
    // Twelve commits at once on a pool of 4: most wait and go together, the large one never with others.
    const commits = await Promise.all(keys.map((key) => store.commit(key, 'a', record(key, sizes[key]), 60_000)));
    expect(commits).toEqual(keys.map(() => true));
    const batches = statements.filter((s) => s.text.includes('$3::bytea[]'));
    expect(batches.length).toBeGreaterThan(0);
    for (const batch of batches) {
      expect(Math.max(...(batch.values![2] as Buffer[]).map((b) => b.length))).toBeLessThanOrEqual(64 * 1024);
    }
    statements.length = 0;
    // Twelve replays of the medium and large records at once (3 connections for claims): each whole.
    const replays = await Promise.all(
      Array.from({ length: 12 }, (_, i) => store.claim(i % 2 ? 'medium' : 'large', claim(`r${i}`))),
    );
    replays.forEach((outcome, i) => {
      const key = i % 2 ? 'medium' : 'large';
      const { response, ...rest } = record(key, sizes[key]);
      if (outcome.state !== 'completed') throw new Error(`replay ${i}: ${outcome.state}`);
      // Buffer.equals: jest's deep equality walks a 200 KiB buffer byte by byte, for seconds.
      expect(outcome.record.response.body.equals(response.body)).toBe(true);
      expect({ ...outcome.record, response: { ...outcome.record.response, body: null } }).toEqual({
        ...rest,
        response: { ...response, body: null },
      });
    });
    // A claim alone takes a record up to 1 MiB inline: one statement.
    p.count = 0;
    expect((await store.claim('medium', claim('alone'))).state).toBe('completed');
    expect(p.count).toBe(1);
    // Those that went in a batch came back without their record, then read it in parts.
    expect(statements.filter((s) => s.text.includes('$4::int[]')).map((s) => s.values![4])).toContain(32 * 1024);
    expect(statements.some((s) => s.text.includes('substring(record FROM $2 FOR $3)'))).toBe(true);
  });

  it('runs named prepared statements, named by their text, so stores of two tables share one connection; or unnamed ones', async () => {
    const url = await database();
    const one = new pg.Pool({ connectionString: url, max: 1 });
    one.on('error', () => undefined);
    pools.push(one);
    const names: (string | undefined)[] = [];
    const seen: PostgresPoolLike = {
      query: (config: { text: string; name?: string }) => {
        names.push(config.name);
        return one.query(config) as never;
      },
      end: () => one.end(),
      on: (event: 'error', listener: (err: Error) => void) => one.on(event, listener),
    };
    const a = new PostgresStore({ pool: seen, tableName: 'idem_a', sweepIntervalMs: 0 });
    const b = new PostgresStore({ pool: seen, tableName: 'idem_b', sweepIntervalMs: 0 });
    stores.push(a, b);
    await a.open();
    await b.open();
    names.length = 0;
    for (const store of [a, b, a, b]) {
      const key = `k${names.length}`;
      expect(await store.claim(key, claim('o'))).toEqual({ state: 'claimed' });
      expect(await store.commit(key, 'o', sampleRecord('fp'), 5000)).toBe(true);
      expect((await store.claim(key, claim('p'))).state).toBe('completed');
    }
    // Two texts per table (claim, commit), each always under one name; no name for two texts.
    expect(names).toHaveLength(12);
    expect(names.every((n) => n !== undefined && /^idem_[0-9a-f]{24}$/.test(n))).toBe(true);
    expect(new Set(names).size).toBe(4);
    expect(names.slice(0, 3)).toEqual(names.slice(6, 9));
    expect(names.slice(0, 3)).not.toEqual(names.slice(3, 6));
    const [{ count }] = (await one.query('SELECT count(*)::int AS count FROM pg_prepared_statements')).rows as {
      count: number;
    }[];
    expect(count).toBe(4);
    const unnamed = new PostgresStore({ pool: seen, tableName: 'idem_c', sweepIntervalMs: 0, preparedStatements: false });
    stores.push(unnamed);
    await unnamed.open();
    names.length = 0;
    await unnamed.claim('k', claim('o'));
    await unnamed.commit('k', 'o', sampleRecord('fp'), 5000);
    expect(names).toEqual([undefined, undefined]);
    expect(() => new PostgresStore({ connectionString: 'x', preparedStatements: 'yes' } as never)).toThrow(
      'PostgresStore: preparedStatements',
    );
  });

  it('a claim waiting on an uncommitted insert of its key sees that row once it commits, or claims once it rolls back', async () => {
    const url = await database();
    const store = new PostgresStore({ connectionString: url, sweepIntervalMs: 0 });
    stores.push(store);
    await store.open();
    for (const [end, expected] of [
      ['COMMIT', { state: 'in-flight', fingerprint: 'other' }],
      ['ROLLBACK', { state: 'claimed' }],
    ] as const) {
      const key = `race-${end}`;
      const other = new pg.Client({ connectionString: url });
      await other.connect();
      await other.query('BEGIN');
      await other.query(
        `INSERT INTO idempotency_records (key, fingerprint, state, owner, expires_at)
         VALUES ($1, 'other', 0, 'someone', clock_timestamp() + interval '1 minute')`,
        [key],
      );
      const pending = store.claim(key, claim('me'));
      await sleep(100); // the claim is now waiting on the row lock
      await other.query(end);
      await other.end();
      expect(await pending).toEqual(expected);
    }
  });

  it('a replay and a conflict write nothing: no transaction id, and no wait behind a replay of the same key in an open transaction', async () => {
    const url = await database();
    const store = new PostgresStore({ connectionString: url, sweepIntervalMs: 0 });
    stores.push(store);
    await store.open();
    await store.claim('stored', claim('a'));
    await store.commit('stored', 'a', sampleRecord('fp'), 60_000);
    await store.claim('running', claim('a'));
    const other = new pg.Client({ connectionString: url });
    await other.connect();
    try {
      for (const key of ['stored', 'running']) {
        await other.query('BEGIN');
        const [row] = (
          await other.query('SELECT claimed FROM idempotency_records_claim2($1, $2, $3, $4, $5)', [key, 'b', 'fp', 5000, 1 << 20])
        ).rows as { claimed: boolean }[];
        expect(row.claimed).toBe(false);
        // The 001 version took a transaction id here: its INSERT … ON CONFLICT DO UPDATE locked the row.
        expect((await other.query('SELECT txid_current_if_assigned() AS xid')).rows).toEqual([{ xid: null }]);
        // With the other replay's transaction still open, the store's own claim of the key answers.
        expect((await store.claim(key, claim('c'))).state).toBe(key === 'stored' ? 'completed' : 'in-flight');
        await other.query('ROLLBACK');
      }
    } finally {
      await other.end();
    }
  });

  it('takes over an expired record and a dead lease inside the claim', async () => {
    const store = await ownStore({ sweepIntervalMs: 0 });
    await store.claim('dead', claim('crashed', 'fp', 50));
    await store.claim('old', claim('a'));
    await store.commit('old', 'a', sampleRecord('fp'), 50);
    await sleep(80);
    expect(await store.claim('dead', claim('next'))).toEqual({ state: 'claimed' });
    expect(await store.claim('old', claim('next'))).toEqual({ state: 'claimed' });
    expect(await store.commit('dead', 'crashed', sampleRecord('fp'), 5000)).toBe(false);
  });

  it("a lapsed claim nobody took is still its owner's: renewed, released, committed", async () => {
    const store = await ownStore({ sweepIntervalMs: 0 });
    for (const k of ['renewed', 'released', 'committed']) await store.claim(k, claim('late', 'fp', 50));
    await sleep(80);
    expect(await store.renewAll([{ key: 'renewed', owner: 'late' }], 60_000)).toEqual([true]);
    expect(await store.claim('renewed', claim('b'))).toEqual({ state: 'in-flight', fingerprint: 'fp' });
    expect(await store.release('released', 'late')).toBe(true);
    expect(await store.peek('released')).toBeUndefined();
    expect(await store.commit('committed', 'late', sampleRecord('late'), 5000)).toBe(true);
    expect((await store.peek('committed'))?.state).toBe('completed');
  });

  it('two pods sweeping at once never fail and never delete a live row', async () => {
    const url = await database();
    const a = new PostgresStore({ connectionString: url, sweepIntervalMs: 0 });
    const b = new PostgresStore({ connectionString: url, sweepIntervalMs: 0 });
    stores.push(a, b);
    await a.open();
    await b.open();
    await server.query(`SELECT 1`);
    const admin = pool(url);
    await admin.query(
      `INSERT INTO idempotency_records (key, fingerprint, state, owner, expires_at)
       SELECT 'expired-' || i, 'fp', 0, 'o', clock_timestamp() - interval '1 second' FROM generate_series(1, 3000) i`,
    );
    for (let i = 0; i < 10; i++) await a.claim(`live-${i}`, claim('o'));
    const [x, y] = await Promise.all([a.sweep(), b.sweep()]);
    expect(x + y).toBe(3000);
    const { rows } = await admin.query<{ n: string }>('SELECT count(*) AS n FROM idempotency_records');
    expect(Number(rows[0].n)).toBe(10);
  });

  it('a sweep runs as many DELETE batches as it needs, ten at most; closing leaves the application pool open', async () => {
    const url = await database();
    const p = counted(pool(url));
    const store = new PostgresStore({ pool: p, sweepIntervalMs: 0 });
    await store.open();
    await p.query({
      text: `INSERT INTO idempotency_records (key, fingerprint, state, owner, expires_at)
       SELECT 'expired-' || i, 'fp', 1, NULL, clock_timestamp() - interval '1 second' FROM generate_series(1, 10500) i`,
    });
    // Each sweep also runs one batch on the recovery points' table (nothing expired there).
    p.count = 0;
    expect(await store.sweep()).toBe(10_000);
    expect(p.count).toBe(11);
    p.count = 0;
    expect(await store.sweep()).toBe(500);
    expect(p.count).toBe(2);
    await store.close();
    const { rows } = await p.query({ text: 'SELECT 1 AS one' });
    expect(rows).toEqual([{ one: 1 }]);
  });

  it('closing ends the pool it created: no connection of its database is left', async () => {
    const url = await database();
    const name = new URL(url).pathname.slice(1);
    const store = new PostgresStore({ connectionString: url, sweepIntervalMs: 0 });
    await store.claim('k', claim('a'));
    const connections = async () =>
      (await server.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [name]))[0].n;
    expect(await connections()).toBeGreaterThan(0);
    await store.close();
    await until(async () => (await connections()) === 0);
  });

  it('uses the database clock, never the pod clock', async () => {
    const store = await ownStore({ sweepIntervalMs: 0 });
    // A pod whose clock is years behind: times taken from it would have expired long ago.
    const now = jest.spyOn(Date, 'now').mockReturnValue(Date.parse('2001-01-01T00:00:00Z'));
    try {
      await store.claim('clock', claim('a'));
      await store.commit('clock', 'a', sampleRecord('fp'), 60_000);
      expect((await store.claim('clock', claim('b'))).state).toBe('completed');
    } finally {
      now.mockRestore();
    }
  });

  it('with createSchema: false creates nothing; the schemaSql() it shows is what it needs', async () => {
    const url = await database();
    const store = new PostgresStore({ connectionString: url, createSchema: false, sweepIntervalMs: 0 });
    stores.push(store);
    await expect(store.claim('k', claim('a'))).rejects.toThrow(/does not exist/);
    const admin = pool(url);
    await admin.query(store.schemaSql());
    expect(await store.claim('k', claim('a'))).toEqual({ state: 'claimed' });
    const { rows } = await admin.query<{ relpersistence: string }>(
      "SELECT relpersistence FROM pg_class WHERE relname = 'idempotency_records'",
    );
    expect(rows[0].relpersistence).toBe('p'); // LOGGED
  });

  it('the shipped migration sql/postgres/001, run as a migration tool runs it, is all a store with createSchema: false needs; 003 then stops its warning', async () => {
    const url = await database();
    const admin = pool(url);
    // One multi-statement query, as TypeORM's queryRunner.query(), Knex's raw() or psql -f send it.
    await admin.query(readFileSync('sql/postgres/001_idempotency_records.sql', 'utf8'));
    const store = new PostgresStore({ pool: admin, createSchema: false, sweepIntervalMs: 0 });
    stores.push(store);
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      await store.open(); // verifies the table and the claim function
      // 001's claim function works, but every replay locks its row: the operator is told to apply 003.
      expect(warn.mock.calls.map(([message]) => message)).toEqual([
        '"public"."idempotency_records_claim2" is migration 001\'s, which locks the row on each replay: apply sql/postgres/003',
      ]);
      expect(await store.claim('k', claim('a'))).toEqual({ state: 'claimed' });
      expect(await store.commit('k', 'a', sampleRecord('fp'), 10_000)).toBe(true);
      expect((await store.claim('k', claim('b'))).state).toBe('completed');
      await admin.query(readFileSync('sql/postgres/003_idempotency_claim_reads_first.sql', 'utf8'));
      warn.mockClear();
      const upgraded = new PostgresStore({ pool: admin, createSchema: false, sweepIntervalMs: 0 });
      stores.push(upgraded);
      await upgraded.open();
      expect(warn).not.toHaveBeenCalled();
      expect((await upgraded.claim('k', claim('b'))).state).toBe('completed');
    } finally {
      warn.mockRestore();
    }
  });

  it("the migrations guide's psql line, run word for word from an app's folder, applies the shipped file", async () => {
    const url = await database();
    const line = /^psql .+$/m.exec(readFileSync('docs/guides/migrations.md', 'utf8'))![0];
    // An app folder whose node_modules holds the package, as npm installs it.
    const app = mkdtempSync(join(tmpdir(), 'idem-psql-'));
    try {
      mkdirSync(join(app, 'node_modules'));
      symlinkSync(resolve('.'), join(app, 'node_modules', 'nestjs-idempotency'), 'dir');
      execFileSync('bash', ['-c', line], { cwd: app, env: { ...process.env, DATABASE_URL: url }, stdio: 'pipe' });
    } finally {
      rmSync(app, { recursive: true, force: true });
    }
    const store = new PostgresStore({ connectionString: url, createSchema: false, sweepIntervalMs: 0 });
    stores.push(store);
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      await store.open();
      expect(warn).not.toHaveBeenCalled(); // 003 applied too: the claim function reads first
    } finally {
      warn.mockRestore();
    }
    expect(await store.claim('k', claim('a'))).toEqual({ state: 'claimed' });
  });

  it("the migrations guide's Knex migration (knex.raw of the shipped file in up()) runs through Knex's migrator, in its transaction", async () => {
    const url = await database();
    const ddl = readFileSync(
      createRequire(import.meta.url).resolve('nestjs-idempotency/sql/postgres/001_idempotency_records.sql'),
      'utf8',
    );
    const { default: knex } = await import('knex');
    const db = knex({ client: 'pg', connection: url });
    try {
      const migrationSource = {
        getMigrations: async () => ['001_idempotency_records'],
        getMigrationName: (name: string) => name,
        getMigration: async () => ({
          up: (k: typeof db) => k.raw(ddl),
          down: (k: typeof db) =>
            k.raw(
              'DROP FUNCTION IF EXISTS "public"."idempotency_records_claim2"(text, text, text, integer, integer); DROP TABLE IF EXISTS "public"."idempotency_records"',
            ),
        }),
      };
      const [, applied] = (await db.migrate.latest({ migrationSource })) as [number, string[]];
      expect(applied).toEqual(['001_idempotency_records']);
      const store = new PostgresStore({ connectionString: url, createSchema: false, sweepIntervalMs: 0 });
      stores.push(store);
      await store.open();
      expect(await store.claim('k', claim('a'))).toEqual({ state: 'claimed' });
    } finally {
      await db.destroy();
    }
  });

  it("the migrations guide's TypeORM migration runs the shipped file through TypeORM's migration runner, and reverts it", async () => {
    const url = await database();
    // The file by the package's name, as an app resolves it (the exports map lists sql/*).
    const ddl = readFileSync(
      createRequire(import.meta.url).resolve('nestjs-idempotency/sql/postgres/001_idempotency_records.sql'),
      'utf8',
    );
    class IdempotencyRecords1764806400000 implements MigrationInterface {
      async up(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(ddl);
      }
      async down(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(
          'DROP FUNCTION IF EXISTS "public"."idempotency_records_claim2"(text, text, text, integer, integer); DROP TABLE IF EXISTS "public"."idempotency_records"',
        );
      }
    }
    const source = new DataSource({ type: 'postgres', url, migrations: [IdempotencyRecords1764806400000], logging: false });
    await source.initialize();
    try {
      expect((await source.runMigrations()).map((m) => m.name)).toEqual(['IdempotencyRecords1764806400000']);
      const store = new PostgresStore({ connectionString: url, createSchema: false, sweepIntervalMs: 0 });
      stores.push(store);
      await store.open();
      expect(await store.claim('k', claim('a'))).toEqual({ state: 'claimed' });
      await store.close();
      await source.undoLastMigration();
      expect(await source.query("SELECT to_regclass('public.idempotency_records') AS t")).toEqual([{ t: null }]);
      expect(await source.query("SELECT count(*)::int AS n FROM pg_proc WHERE proname = 'idempotency_records_claim2'")).toEqual([
        { n: 0 },
      ]);
    } finally {
      await source.destroy();
    }
  });

  it('a schema it cannot create fails open() after three attempts, naming the reason', async () => {
    const url = await database();
    const admin = pool(url);
    await admin.query('DROP ROLE IF EXISTS weak; CREATE ROLE weak LOGIN');
    // Since PostgreSQL 15 only the owner may create in "public": the new role cannot.
    const weakUrl = new URL(url);
    weakUrl.username = 'weak';
    const store = new PostgresStore({ connectionString: weakUrl.toString(), sweepIntervalMs: 0 });
    stores.push(store);
    await expect(store.open()).rejects.toThrow(
      /^PostgresStore: the schema could not be created: permission denied for schema public/,
    );
    await admin.query(`GRANT CREATE ON SCHEMA public TO weak`);
    await store.open(); // a failed attempt is forgotten: the next one succeeds
    expect(await store.claim('k', claim('a'))).toEqual({ state: 'claimed' });
  });

  it('bounds each statement: a claim stuck behind a lock fails after statementTimeoutMs', async () => {
    const url = await database();
    const store = new PostgresStore({ connectionString: url, statementTimeoutMs: 300, sweepIntervalMs: 0 });
    stores.push(store);
    const other = await lockedExpiredClaim(store, url, 'locked');
    const started = Date.now();
    await expect(store.claim('locked', claim('b'))).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(3000);
    await other.query('ROLLBACK');
    await other.end();
    expect(await store.claim('locked', claim('b'))).toEqual({ state: 'claimed' });
  });

  it('a claim answered for its time bound never lands later: the server cancels it before the client gives up', async () => {
    const url = await database();
    const proxy = await FaultProxy.start(Number(new URL(url).port));
    try {
      const store = new PostgresStore({ connectionString: proxy.url(url), statementTimeoutMs: 300, sweepIntervalMs: 0 });
      stores.push(store);
      const other = await lockedExpiredClaim(store, url, 'landing');
      // Now 150 ms each way (the connection is open): the server starts the statement well after the
      // client started waiting for it.
      proxy.delay({ delayMs: 150, jitterMs: 0 });
      await expect(store.claim('landing', claim('b', 'fp-b'))).rejects.toThrow();
      // The lock goes at once: a statement still waiting on the server would now take the key over.
      await other.query('ROLLBACK');
      await other.end();
      await sleep(500);
      // Had b's claim landed, its 5 s lease would hold the key with no handler behind it.
      const direct = new PostgresStore({ connectionString: url, sweepIntervalMs: 0 });
      stores.push(direct);
      expect(await direct.claim('landing', claim('c'))).toEqual({ state: 'claimed' });
    } finally {
      await proxy.close();
    }
  });

  /** A record whose stored value is exactly `bytes` long. */
  const recordOf = (bytes: number, fill = 7) => {
    const head = encodeRecord({ fingerprint: 'fp', response: { status: 200, headers: {}, body: Buffer.alloc(0) } }).length;
    return { fingerprint: 'fp', response: { status: 200, headers: {}, body: Buffer.alloc(bytes - head, fill) } };
  };

  it('commits a record over 1 MiB on a connection of its own, timed for its size; one of 1 MiB, or a pool without connect(), on the pool', async () => {
    const url = await database();
    const inner = pool(url);
    const sizedStatements: string[] = [];
    const app: PostgresPoolLike = {
      query: (config) => inner.query(config) as never,
      connect: async () => {
        const client = await inner.connect();
        return {
          query: (config: { text: string }) => {
            sizedStatements.push(config.text.split('\n')[0]);
            return client.query(config);
          },
          release: (err?: Error | boolean) => client.release(err),
        };
      },
      end: () => Promise.resolve(),
      on: (event, listener) => inner.on(event, listener),
    };
    const store = new PostgresStore({ pool: app, statementTimeoutMs: 2_000 });
    stores.push(store);
    const limit = 1 << 20;
    await store.claim('at-limit', claim('a'));
    expect(await store.commit('at-limit', 'a', recordOf(limit), 5_000)).toBe(true);
    expect(sizedStatements).toEqual([]);
    await store.claim('over', claim('a'));
    expect(await store.commit('over', 'a', recordOf(limit + 1), 5_000)).toBe(true);
    // 2 000 ms and 1 048 577 bytes at 8 000 bytes per ms.
    expect(sizedStatements).toEqual([
      'SET statement_timeout = 2132',
      expect.stringContaining('WITH done AS'),
      'RESET statement_timeout',
    ]);
    const without = new PostgresStore({ pool: counted(pool(url)) });
    stores.push(without);
    await without.claim('no-connect', claim('a'));
    expect(await without.commit('no-connect', 'a', recordOf(limit + 1, 9), 5_000)).toBe(true);
    const replay = await store.claim('no-connect', claim('b'));
    expect(replay.state === 'completed' && replay.record.response.body.equals(recordOf(limit + 1, 9).response.body)).toBe(true);
  }, 30_000);

  it('reads a large record again when its row changed between the claim and its parts; one that keeps changing fails after three', async () => {
    const url = await database();
    const inner = pool(url);
    let moves = 0;
    const moving: PostgresPoolLike = {
      query: async (config: { text: string; values?: unknown[] }) => {
        if (moves > 0 && config.text.includes('substring(record')) {
          moves--;
          // Another pod's statement between the claim and the part read: a new row version.
          await inner.query('UPDATE idempotency_records SET expires_at = expires_at WHERE key = $1', [config.values![0]]);
        }
        return inner.query(config) as never;
      },
      end: () => Promise.resolve(),
      on: (event, listener) => inner.on(event, listener),
    };
    const store = new PostgresStore({ pool: moving });
    stores.push(store);
    const large = recordOf(3 << 20, 5);
    await store.claim('large', claim('a'));
    expect(await store.commit('large', 'a', large, 60_000)).toBe(true);
    moves = 2;
    const read = await store.claim('large', claim('b'));
    expect(read.state === 'completed' && read.record.response.body.equals(large.response.body)).toBe(true);
    expect(moves).toBe(0);
    moves = 3;
    await expect(store.claim('large', claim('c'))).rejects.toThrow('the large record of the key changed each time it was read');
    expect(moves).toBe(0);
  }, 30_000);

  it('survives a server restart and terminated connections without a restart of its own', async () => {
    const own = await PostgresServer.start({ ownServer: true });
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const store = new PostgresStore({ connectionString: own.url, statementTimeoutMs: 500, sweepIntervalMs: 0 });
    try {
      await store.open();
      expect(await store.claim('before', claim('a'))).toEqual({ state: 'claimed' });
      await own.stop();
      await expect(store.claim('during', claim('a'))).rejects.toThrow();
      await own.resume();
      const after = async (prefix: string) => {
        for (let i = 0; i < 20; i++) {
          try {
            return await store.claim(`${prefix}-${i}`, claim('a'));
          } catch {
            await sleep(100);
          }
        }
        throw new Error('never recovered');
      };
      expect(await after('restarted')).toEqual({ state: 'claimed' });
      await own.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND datname = 'postgres'",
      );
      await sleep(100);
      // The pool's idle connections died with their backends: heard and logged, never a crash.
      expect(errors).toHaveBeenCalledWith(expect.stringContaining('an idle PostgreSQL connection failed'));
      expect(await after('terminated')).toEqual({ state: 'claimed' });
    } finally {
      await store.close();
      await own.destroy();
      errors.mockRestore();
    }
  });
});
