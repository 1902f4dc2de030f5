import { afterAll } from '@jest/globals';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type IdempotencyStore, InMemoryStore, MySqlStore, PostgresStore, SqliteStore } from '../../lib/index.js';
import { MySqlServer, mysqlAvailable } from './mysql-server.js';
import { PostgresServer, postgresAvailable } from './postgres-server.js';
import { sleep } from './timing.js';

/** The stores the e2e suites run on (TEST_STORES=memory narrows it, as TEST_ADAPTERS does adapters). */
export type StoreName = 'memory' | 'sqlite' | 'postgres' | 'mysql';

const ALL: StoreName[] = ['memory', 'sqlite', 'postgres', 'mysql'];

/** A store for one suite, with a way to move its clock past a TTL. */
export interface StoreUnderTest {
  readonly cache: IdempotencyStore;
  /** Lets `ms` pass for the store: its injected clock, or real time for a server's clock. */
  advance(ms: number): Promise<void>;
  /** Entries (claims and records) the store holds. */
  count(): Promise<number>;
}

let postgres: Promise<PostgresServer> | undefined;
let mysql: Promise<MySqlServer> | undefined;
let databases = 0;
let dir: string | undefined;

// One server and one temporary folder per test file, whatever number of suites use them.
afterAll(async () => {
  const server = postgres;
  postgres = undefined;
  if (server) await (await server).destroy();
  const mysqlServer = mysql;
  mysql = undefined;
  if (mysqlServer) await (await mysqlServer).destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** The stores to run on here: PostgreSQL only where it can run (loudly skipped otherwise). */
export function storeNames(suite: string): StoreName[] {
  const wanted = (process.env.TEST_STORES?.split(',') as StoreName[] | undefined) ?? ALL;
  return wanted.filter(
    (name) => (name !== 'postgres' || postgresAvailable(suite)) && (name !== 'mysql' || mysqlAvailable(suite)),
  );
}

/** A fresh store of that kind: its own table, file or database. Call it in a beforeAll. */
export async function openStore(name: StoreName): Promise<StoreUnderTest> {
  let now = 1_000_000;
  const clock = () => now;
  const advanceClock = async (ms: number) => {
    now += ms;
  };
  switch (name) {
    case 'memory': {
      const cache = new InMemoryStore({ now: clock });
      return { cache, advance: advanceClock, count: async () => cache.size };
    }
    case 'sqlite': {
      dir ??= mkdtempSync(join(tmpdir(), 'idem-e2e-sqlite-'));
      const database = new Database(join(dir, `e2e-${++databases}.db`));
      database.pragma('journal_mode = WAL');
      const count = () => database.prepare('SELECT count(*) AS n FROM idempotency_records').get() as { n: number };
      return {
        cache: new SqliteStore({ database, now: clock }),
        advance: advanceClock,
        count: async () => count().n,
      };
    }
    case 'postgres': {
      postgres ??= PostgresServer.start();
      const server = await postgres;
      const url = await server.createDatabase(`e2e_${process.pid}_${++databases}`);
      // The database's clock cannot be moved: let the time pass, with a margin for its precision.
      const count = async () => {
        const rows = await server.query<{ n: string }>('SELECT count(*) AS n FROM idempotency_records', [], url);
        return Number(rows[0].n);
      };
      return { cache: new PostgresStore({ connectionString: url }), advance: (ms) => sleep(ms + 15), count };
    }
    case 'mysql': {
      mysql ??= MySqlServer.start();
      const server = await mysql;
      const url = await server.createDatabase(`e2e_${process.pid}_${++databases}`);
      const count = async () => {
        const rows = await server.query<{ n: number }>('SELECT count(*) AS n FROM idempotency_records', [], url);
        return Number(rows[0].n);
      };
      // DATETIME(3): a millisecond's precision, as PostgreSQL's clock is waited out above.
      return { cache: new MySqlStore({ uri: url }), advance: (ms) => sleep(ms + 15), count };
    }
  }
}
