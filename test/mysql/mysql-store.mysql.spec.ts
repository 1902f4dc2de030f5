import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import mysql from 'mysql2/promise';
import { readFileSync } from 'node:fs';
import { MySqlStore } from '../../lib/index.js';
import type { MySqlPoolLike } from '../../lib/stores/index.js';
import { MySqlServer, mysqlAvailable } from '../support/mysql-server.js';
import { sampleRecord, storeContract } from '../support/store-contract.js';
import { sleep } from '../support/timing.js';

const describeMy = mysqlAvailable('MySQL store suite') ? describe : describe.skip;

let server: MySqlServer;
let databases = 0;
const stores: MySqlStore[] = [];
const pools: mysql.Pool[] = [];

/** A database of its own for each store, so no test sees another's rows. */
async function database(): Promise<string> {
  return server.createDatabase(`store_${process.pid}_${++databases}`);
}
async function ownStore(options: Partial<ConstructorParameters<typeof MySqlStore>[0]> = {}, url?: string): Promise<MySqlStore> {
  const store = new MySqlStore({ uri: url ?? (await database()), ...options });
  stores.push(store);
  await store.open();
  return store;
}
function pool(url: string, size = 4): mysql.Pool {
  const p = mysql.createPool({ uri: url, connectionLimit: size });
  pools.push(p);
  return p;
}

/** A pool that counts the statements it runs: what the round-trip targets are measured with. */
function counted(inner: mysql.Pool): MySqlPoolLike & { count: number; texts: string[] } {
  const wrapper = {
    count: 0,
    texts: [] as string[],
    execute: (options: { sql: string }, values: unknown[]) => {
      wrapper.count++;
      wrapper.texts.push(options.sql);
      return inner.execute(options, values as never) as never;
    },
    query: (options: { sql: string }, values?: unknown[]) => {
      wrapper.count++;
      wrapper.texts.push(options.sql);
      return inner.query(options, values) as never;
    },
    end: () => inner.end(),
  };
  return wrapper;
}

const claim = (owner: string, fingerprint = 'fp', leaseMs = 5000) => ({ owner, fingerprint, leaseMs });

describeMy('MySqlStore (on MariaDB)', () => {
  beforeAll(async () => {
    server = await MySqlServer.start();
  }, 120_000);
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await Promise.all(pools.map((p) => p.end()));
    await server?.destroy();
  });

  let contractUrl: string | undefined;
  storeContract(
    'MySqlStore (its own pool)',
    async () => {
      contractUrl = await database();
      return ownStore({}, contractUrl);
    },
    undefined,
    async (_store, key, value, ttlMs) => {
      // As a newer release would commit it: a record row.
      await server.query(
        `INSERT INTO idempotency_records (\`key\`, fingerprint, state, owner, expires_at, record)
         VALUES (?, 'fp-future', 1, NULL, UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, ?)`,
        [key, ttlMs * 1000, value],
        contractUrl,
      );
    },
    // Another pod's store: a pool of its own on the same database.
    async () => ownStore({}, contractUrl),
  );
  storeContract('MySqlStore (the application pool, another table)', async () => {
    const store = new MySqlStore({ pool: pool(await database()), tableName: 'idem_keys' });
    stores.push(store);
    return store;
  });

  it('refuses bad options, naming them', () => {
    expect(() => new MySqlStore({})).toThrow('MySqlStore: give exactly one of uri (a pool of its own) and pool (yours)');
    expect(() => new MySqlStore({ uri: 'x', tableName: 'a`b' })).toThrow('MySqlStore: tableName must be an SQL identifier');
    expect(() => new MySqlStore({ uri: 'x', tableName: 'a'.repeat(59) })).toThrow(
      'MySqlStore: tableName may have at most 58 characters here',
    );
    expect(() => new MySqlStore({ uri: 'x', statementTimeoutMs: 0 })).toThrow(
      'MySqlStore: statementTimeoutMs must be an integer from 1 to 2147483647, got 0',
    );
    expect(() => new MySqlStore({ uri: 'x', poolsize: 3 } as never)).toThrow(
      'MySqlStore: unknown option "poolsize" (did you mean poolSize?)',
    );
  });

  it('costs 2 round trips for a first request, 1 for a replay, 1 for a conflict', async () => {
    const p = counted(pool(await database()));
    const store = new MySqlStore({ pool: p, sweepIntervalMs: 0 });
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

  it('compares keys byte for byte, whatever the server collation: Key-A and key-a, é and e, are two keys', async () => {
    const url = await database();
    await server.query(`ALTER DATABASE \`${url.split('/').pop()}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci`);
    const store = await ownStore({}, url);
    for (const [a, b] of [
      ['Key-A', 'key-a'],
      ['café', 'cafe'],
      ['a ', 'a'],
    ]) {
      expect(await store.claim(a, claim('first'))).toEqual({ state: 'claimed' });
      expect(await store.claim(b, claim('second'))).toEqual({ state: 'claimed' });
    }
  });

  it('takes a key of 255 characters under a 255-character scope, 4 bytes each; refuses one over 3,072 bytes, naming the limit', async () => {
    const store = await ownStore();
    const longest = `idem:${'𝄞'.repeat(255)}:${'😀'.repeat(255)}`;
    expect(Buffer.byteLength(longest)).toBeLessThanOrEqual(3072);
    expect(await store.claim(longest, claim('a'))).toEqual({ state: 'claimed' });
    expect(await store.commit(longest, 'a', sampleRecord('fp'), 5000)).toBe(true);
    expect(await store.claim(longest, claim('b'))).toEqual({ state: 'completed', record: sampleRecord('fp') });
    await expect(store.claim('k'.repeat(3073), claim('a'))).rejects.toThrow(
      "the store key is 3073 bytes, more than MySqlStore's 3072",
    );
  });

  it('a deadlock between claims of neighbouring keys is retried, never answered as a failure', async () => {
    const url = await database();
    const a = await ownStore({ poolSize: 8, sweepIntervalMs: 0 }, url);
    const b = await ownStore({ poolSize: 8, sweepIntervalMs: 0 }, url);
    // Bursts of claims on interleaved neighbouring keys from two pods, some keys twice: the insert
    // locks of InnoDB's duplicate checks meet in both orders.
    for (let round = 0; round < 5; round++) {
      const keys = Array.from({ length: 40 }, (_, i) => `r${round}-${String(i % 30).padStart(3, '0')}`);
      const outcomes = await Promise.all(keys.map((key, i) => (i % 2 ? a : b).claim(key, claim(`o${round}-${i}`))));
      const claimed = new Set(keys.filter((_, i) => outcomes[i].state === 'claimed'));
      expect(claimed.size).toBe(30);
      expect(outcomes.filter((o) => o.state === 'claimed')).toHaveLength(30);
    }
  });

  it('uses the database clock (UTC, whatever the session time zone), never the pod clock', async () => {
    const store = await ownStore();
    await server.query("SET GLOBAL time_zone = '+05:00'");
    try {
      const before = Date.now();
      await store.claim('clock', claim('a'));
      await store.commit('clock', 'a', sampleRecord('fp'), 60_000);
      const peeked = await store.peek('clock');
      expect(peeked!.expiresAt).toBeGreaterThanOrEqual(before + 60_000 - 1000);
      expect(peeked!.expiresAt).toBeLessThanOrEqual(Date.now() + 60_000 + 1000);
    } finally {
      await server.query("SET GLOBAL time_zone = 'SYSTEM'");
    }
  });

  it('takes over an expired record and a dead lease inside the claim', async () => {
    const store = await ownStore();
    await store.claim('old', claim('a'));
    await store.commit('old', 'a', sampleRecord('fp'), 50);
    await store.claim('dead', claim('crashed', 'fp', 50));
    await sleep(120);
    expect(await store.claim('old', claim('b'))).toEqual({ state: 'claimed' });
    expect(await store.claim('dead', claim('c'))).toEqual({ state: 'claimed' });
    expect(await store.commit('dead', 'crashed', sampleRecord('fp'), 5000)).toBe(false);
  });

  it('renews many claims in one statement; a settled or foreign claim reads as not renewed', async () => {
    const p = counted(pool(await database()));
    const store = new MySqlStore({ pool: p, sweepIntervalMs: 0 });
    stores.push(store);
    await store.open();
    const keys = Array.from({ length: 70 }, (_, i) => `held-${i}`);
    for (const key of keys) await store.claim(key, claim(`o-${key}`, 'fp', 200));
    p.count = 0;
    expect(
      await store.renewAll(
        keys.map((key) => ({ key, owner: `o-${key}` })),
        5000,
      ),
    ).toEqual(keys.map(() => true));
    // 70 claims: a statement of 64 and one of 8.
    expect(p.count).toBe(2);
    await sleep(300);
    expect(await store.claim('held-3', claim('late'))).toEqual({ state: 'in-flight', fingerprint: 'fp' });
    await store.commit('held-5', 'o-held-5', sampleRecord('fp'), 5000);
    const answers = await store.renewAll(
      [
        { key: 'held-1', owner: 'o-held-1' },
        { key: 'held-5', owner: 'o-held-5' },
        { key: 'held-2', owner: 'intruder' },
        { key: 'held-1', owner: 'o-held-1' },
      ],
      5000,
    );
    expect(answers).toEqual([true, false, false, true]);
  });

  it('sweeps expired rows in batches and never a live claim or record', async () => {
    const url = await database();
    const store = await ownStore({ sweepIntervalMs: 0 }, url);
    for (let i = 0; i < 30; i++) await store.claim(`gone-${i}`, claim('a', 'fp', 30));
    await store.claim('live', claim('a', 'fp', 60_000));
    await store.claim('kept', claim('a'));
    await store.commit('kept', 'a', sampleRecord('fp'), 60_000);
    await sleep(100);
    expect(await store.sweep()).toBe(30);
    const [{ n }] = await server.query<{ n: number }>('SELECT count(*) AS n FROM idempotency_records', [], url);
    expect(Number(n)).toBe(2);
    expect(await store.claim('live', claim('b'))).toEqual({ state: 'in-flight', fingerprint: 'fp' });
  });

  it('with createSchema: false creates nothing and refuses to start, naming the table; the shipped migration is all it needs', async () => {
    const url = await database();
    const bare = new MySqlStore({ uri: url, createSchema: false });
    stores.push(bare);
    await expect(bare.open()).rejects.toThrow(
      'MySqlStore: table `idempotency_records` is not what this release needs: the table does not exist',
    );
    expect(bare.schemaSql()).toBe(readFileSync('sql/mysql/001_idempotency_records.sql', 'utf8').replace(/^(--[^\n]*\n)+/, ''));
    // The mysql client's script, as a migration runs it: the statements between the delimiters.
    const script = bare.schemaSql();
    const [create, rest] = script.split(';\nDELIMITER //\n');
    const procedures = rest
      .replace(/DELIMITER ;\n$/, '')
      .split(' //\n')
      .filter(Boolean);
    for (const statement of [create, ...procedures]) await server.query(statement, [], url);
    const store = await ownStore({ createSchema: false }, url);
    expect(await store.claim('k', claim('a'))).toEqual({ state: 'claimed' });
  });

  it('refuses a table made by hand with a case-insensitive key, or without its procedures, naming each problem', async () => {
    const url = await database();
    await server.query(
      `CREATE TABLE idempotency_records (\`key\` VARCHAR(255) COLLATE utf8mb4_general_ci PRIMARY KEY, fingerprint TEXT NOT NULL,
       state TINYINT NOT NULL, owner VARBINARY(255), expires_at DATETIME(3) NOT NULL, record LONGBLOB)`,
      [],
      url,
    );
    const store = new MySqlStore({ uri: url, createSchema: false });
    stores.push(store);
    await expect(store.open()).rejects.toThrow(
      'MySqlStore: table `idempotency_records` is not what this release needs: column key is varchar, not varbinary; column fingerprint is text, not varbinary; the procedure idempotency_records_claim is missing',
    );
  });

  it("refuses to start when the server's max_allowed_packet cannot carry a record of maxResponseBytes", async () => {
    const store = new MySqlStore({ uri: await database() });
    stores.push(store);
    await expect(store.open({ maxResponseBytes: 64 * 1024 * 1024 })).rejects.toThrow(
      "MySqlStore: the server's max_allowed_packet is 67108864 bytes, too small for a response of maxResponseBytes (68157440 bytes with its record): raise max_allowed_packet on the server, or lower maxResponseBytes",
    );
    const fits = new MySqlStore({ uri: await database() });
    stores.push(fits);
    await expect(fits.open({ maxResponseBytes: 8 * 1024 * 1024 })).resolves.toBeUndefined();
  });

  it('keeps an 8 MiB body byte for byte through the claim procedure', async () => {
    const store = await ownStore();
    const base = sampleRecord('fp');
    const record = { ...base, response: { ...base.response, body: Buffer.alloc(8 * 1024 * 1024, 7) } };
    await store.claim('big', claim('a'));
    expect(await store.commit('big', 'a', record, 60_000)).toBe(true);
    const replay = await store.claim('big', claim('b'));
    expect(replay.state === 'completed' && replay.record.response.body.equals(record.response.body)).toBe(true);
  });

  it('connections the server closed while idle (wait_timeout), or killed, are replaced, not answered 503', async () => {
    const url = await database();
    await server.query('SET GLOBAL wait_timeout = 1');
    let store: MySqlStore;
    try {
      store = await ownStore({ sweepIntervalMs: 0 }, url);
      await Promise.all(['a', 'b', 'c'].map((key) => store.claim(key, claim('a'))));
    } finally {
      await server.query('SET GLOBAL wait_timeout = 28800');
    }
    // Every connection of the pool sits idle past its wait_timeout: the server closes each.
    const connections = async () =>
      server.query<{ id: number }>('SELECT ID AS id FROM information_schema.PROCESSLIST WHERE DB = ?', [url.split('/').pop()]);
    await sleep(2500);
    expect(await connections()).toEqual([]);
    expect(await store.claim('after-idle', claim('a'))).toEqual({ state: 'claimed' });
    expect(await store.commit('after-idle', 'a', sampleRecord('fp'), 5000)).toBe(true);
    for (const { id } of await connections()) await server.query(`KILL ${Number(id)}`);
    await sleep(200);
    expect(await store.claim('after-kill', claim('a'))).toEqual({ state: 'claimed' });
  });

  it('its own connections read committed and wait for a row lock no longer than the statement timeout', async () => {
    const store = await ownStore({ statementTimeoutMs: 1000 });
    const session = async () => {
      const [row] = (await (store as unknown as { rows: (lane: number, sql: string, v: unknown[]) => Promise<unknown[]> }).rows(
        1,
        'SELECT @@tx_isolation AS isolation, @@innodb_lock_wait_timeout AS wait',
        [],
      )) as { isolation: string; wait: number }[];
      return row;
    };
    // MariaDB's name of the isolation variable (MySQL 8 calls it transaction_isolation).
    expect(await session()).toEqual({ isolation: 'READ-COMMITTED', wait: 1 });
  });

  it('a claim stuck behind a row lock fails on the server after the statement timeout, and never lands later', async () => {
    const url = await database();
    // 1.2 s: the server waits 2 whole seconds, so the client must wait longer than that, not 1.7 s.
    const store = await ownStore({ statementTimeoutMs: 1200, sweepIntervalMs: 0 }, url);
    await store.claim('locked', claim('a', 'fp', 50));
    await sleep(100);
    const other = await mysql.createConnection({ uri: url });
    try {
      await other.query('BEGIN');
      await other.query('SELECT * FROM idempotency_records WHERE `key` = ? FOR UPDATE', ['locked']);
      // The server's lock wait timeout, not the client's: the statement was rolled back there.
      await expect(store.claim('locked', claim('b'))).rejects.toThrow('Lock wait timeout exceeded');
      await other.query('COMMIT');
    } finally {
      await other.end();
    }
    expect(await store.claim('locked', claim('c'))).toEqual({ state: 'claimed' });
  });

  it('closing ends the pool it created: no connection of its database is left', async () => {
    const url = await database();
    const store = new MySqlStore({ uri: url });
    await store.open();
    await store.claim('k', claim('a'));
    await store.close();
    await sleep(100);
    const left = await server.query('SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ?', [url.split('/').pop()]);
    expect(left).toHaveLength(0);
    await expect(store.claim('k2', claim('a'))).rejects.toThrow('the idempotency store is closed');
  });
});
