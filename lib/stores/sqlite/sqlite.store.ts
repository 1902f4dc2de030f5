import { Logger } from '@nestjs/common';
import { MAX_TIMER_MS } from '../../shared/idempotency.constants.js';
import { CONFIG_ERRORS } from '../../shared/messages/config.messages.js';
import type {
  ClaimOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
  IdempotencyStore,
  OwnedKey,
  PeekedEntry,
} from '../contract/idempotency-store.interface.js';
import { fail, integerIn, refuseUnknownKeys, sqlIdentifier } from '../../shared/options/option.validators.js';
import { importRequired } from '../../shared/utils/optional-peer.util.js';
import { DEFAULT_SWEEP_INTERVAL_MS, DEFAULT_TABLE_NAME, SWEEP_BATCH, SWEEP_BATCHES } from '../shared/sql-store.options.js';
import { LazyConnection } from '../shared/lazy.connection.js';
import { SqlSweeper } from '../shared/sql.sweeper.js';
import {
  DEFAULT_BUSY_TIMEOUT_MS,
  type SqliteDatabaseLike,
  type SqliteStatementLike,
  type SqliteStoreOptions,
} from './sqlite-store.options.js';
import { lentWait, SYNC_BUSY_MS } from './sqlite.locks.js';
import { SqliteBatch } from './sqlite.batch.js';
import { sqliteSchemaSql } from './sqlite.schema.js';
import { verifySqliteTable } from './sqlite.verifier.js';
import { held, type HeldRow } from '../shared/sql.rows.js';
import { encodeRecord } from '../shared/store-value.codec.js';

const OPTION_KEYS = [
  'filename',
  'database',
  'tableName',
  'createSchema',
  'sweepIntervalMs',
  'busyTimeoutMs',
  'synchronous',
  'now',
] as const;

interface Statements {
  commit: SqliteStatementLike;
  release: SqliteStatementLike;
  renew: SqliteStatementLike;
  sweep: SqliteStatementLike;
  peek: SqliteStatementLike;
  forget: SqliteStatementLike;
  claim: (key: string, claim: IdempotencyClaim, now: number) => HeldRow | undefined;
  renewAll: (claims: readonly OwnedKey[], until: number) => boolean[];
  /** Runs synchronous statements in the transaction of this turn's batch. */
  batch: SqliteBatch;
}

/**
 * An {@link IdempotencyStore} on SQLite (better-sqlite3): the durable embedded default. The operations
 * of one turn of the event loop run in one synchronous transaction, never left open across an `await`;
 * in WAL mode with a busy timeout, several processes on one host can share the file. Times are integer
 * ms from the store's clock.
 */
export class SqliteStore implements IdempotencyStore {
  private readonly logger = new Logger('SqliteStore');
  private readonly table: string;
  private readonly busyTimeoutMs: number;
  private readonly synchronous: 'full' | 'normal';
  private readonly now: () => number;
  private readonly sweeper: SqlSweeper;
  private readonly connection = new LazyConnection(() => this.prepare());
  private db: SqliteDatabaseLike | undefined;

  constructor(private readonly options: SqliteStoreOptions) {
    const where = 'SqliteStore';
    if (options === null || typeof options !== 'object') fail(where, CONFIG_ERRORS.notAnObject);
    refuseUnknownKeys(where, options, OPTION_KEYS, undefined);
    if ((options.filename === undefined) === (options.database === undefined)) fail(where, CONFIG_ERRORS.sqliteTarget);
    this.table = sqlIdentifier(where, 'tableName', options.tableName ?? DEFAULT_TABLE_NAME);
    this.busyTimeoutMs = integerIn(where, 'busyTimeoutMs', options.busyTimeoutMs, DEFAULT_BUSY_TIMEOUT_MS, 0, MAX_TIMER_MS);
    if (options.synchronous !== undefined && options.synchronous !== 'full' && options.synchronous !== 'normal') {
      fail(where, CONFIG_ERRORS.sqliteSynchronous(options.synchronous));
    }
    this.synchronous = options.synchronous ?? 'normal';
    this.now = options.now ?? Date.now;
    const interval = integerIn(where, 'sweepIntervalMs', options.sweepIntervalMs, DEFAULT_SWEEP_INTERVAL_MS, 0, MAX_TIMER_MS);
    this.sweeper = new SqlSweeper(interval, async () => this.sweep(), this.logger);
  }

  /** The DDL the store runs with `createSchema` (the default): for a migration of your own. */
  schemaSql(): string {
    return sqliteSchemaSql(this.table);
  }

  /** Opens the database (and creates the schema unless told not to); the module calls it at startup. */
  async open(): Promise<void> {
    await this.statements();
  }

  async claim(key: string, claim: IdempotencyClaim): Promise<ClaimOutcome> {
    const row = await this.locked((s) => s.claim(key, claim, this.now()));
    return row ? held(row) : { state: 'claimed' };
  }

  /** A read of the table, after checking it is the table this release needs. */
  async ping(): Promise<void> {
    const s = await this.statements();
    verifySqliteTable(this.db!, this.table);
    await this.locked(() => s.peek.get('', this.now()));
  }

  async peek(key: string): Promise<PeekedEntry | undefined> {
    const row = (await this.locked((s) => s.peek.get(key, this.now()))) as (HeldRow & { expires_at: number }) | undefined;
    return row && { ...held(row), expiresAt: row.expires_at };
  }

  async forget(key: string): Promise<boolean> {
    return (await this.locked((s) => s.forget.run(key, this.now()).changes)) === 1;
  }

  async commit(key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean> {
    const value = encodeRecord(record);
    return (await this.locked((s) => s.commit.run(value, this.now() + ttlMs, key, owner).changes)) === 1;
  }

  async release(key: string, owner: string): Promise<boolean> {
    return (await this.locked((s) => s.release.run(key, owner).changes)) === 1;
  }

  async renew(key: string, owner: string, leaseMs: number): Promise<boolean> {
    return (await this.renewAll([{ key, owner }], leaseMs))[0];
  }

  /** Every claim in one transaction. */
  async renewAll(claims: readonly OwnedKey[], leaseMs: number): Promise<boolean[]> {
    return this.locked((s) => s.renewAll(claims, this.now() + leaseMs));
  }

  /** Deletes expired rows in batches. */
  async sweep(): Promise<number> {
    let deleted = 0;
    for (let batch = 0; batch < SWEEP_BATCHES; batch++) {
      const changes = await this.locked((s) => s.sweep.run(this.now()).changes);
      deleted += changes;
      if (changes < SWEEP_BATCH) break;
    }
    return deleted;
  }

  /** Runs `work` on the statements in the next batch (which waits out another connection's lock). */
  private async locked<T>(work: (s: Statements) => T): Promise<T> {
    const s = await this.statements();
    return s.batch.run(() => work(s));
  }

  /** Stops the sweep; closes the database only when this store opened it, after its last batch. */
  async close(): Promise<void> {
    this.sweeper.stop();
    const ready = this.connection.take();
    if (!ready) return;
    const s = await ready.catch(() => undefined);
    await s?.batch.drained();
    if (this.options.database) return;
    this.db?.close();
    this.db = undefined;
  }

  private statements(): Promise<Statements> {
    return this.connection.get();
  }

  private async prepare(): Promise<Statements> {
    const db = this.options.database ?? (await this.openFile(this.options.filename!));
    this.db = db;
    const wait = Math.min(SYNC_BUSY_MS, this.busyTimeoutMs);
    // A connection of its own waits the whole busyTimeoutMs while it creates the schema (two pods
    // starting on one file; nothing is served yet), and briefly from then on. The application's
    // connection keeps the application's setting, except while the store's own statements run.
    if (!this.options.database) db.pragma(`busy_timeout = ${this.busyTimeoutMs}`);
    if (this.options.createSchema !== false) db.exec(this.schemaSql());
    verifySqliteTable(db, this.table);
    if (!this.options.database) db.pragma(`busy_timeout = ${wait}`);
    const briefly = this.options.database ? lentWait(db, wait) : <T>(work: () => T): T => work();
    const t = `"${this.table}"`;
    const live = db.prepare(`SELECT state, fingerprint, record, expires_at FROM ${t} WHERE key = ? AND expires_at > ?`);
    // Inserts, or takes over an expired row in place; RETURNING yields a row only when it did.
    const takeOrInsert = db.prepare(
      `INSERT INTO ${t} (key, fingerprint, state, owner, expires_at, record) VALUES (?, ?, 0, ?, ?, NULL)
       ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, state = 0, owner = excluded.owner,
         expires_at = excluded.expires_at, record = NULL
       WHERE ${t}.expires_at <= ?
       RETURNING 1 AS claimed`,
    );
    const claim = (key: string, c: IdempotencyClaim, now: number): HeldRow | undefined => {
      if (takeOrInsert.get(key, c.fingerprint, c.owner, now + c.leaseMs, now)) return undefined;
      return live.get(key, now) as HeldRow;
    };
    // The owner token fences, not the clock: a lapsed claim is its owner's until another takes the key.
    const mine = `key = ? AND owner = ? AND state = 0`;
    const renew = db.prepare(`UPDATE ${t} SET expires_at = ? WHERE ${mine}`);
    const renewAll = (claims: readonly OwnedKey[], until: number): boolean[] =>
      claims.map((c) => renew.run(until, c.key, c.owner).changes === 1);
    this.sweeper.start();
    return {
      commit: db.prepare(`UPDATE ${t} SET state = 1, owner = NULL, record = ?, expires_at = ? WHERE ${mine}`),
      release: db.prepare(`DELETE FROM ${t} WHERE ${mine}`),
      renew,
      peek: live,
      forget: db.prepare(`DELETE FROM ${t} WHERE key = ? AND expires_at > ?`),
      sweep: db.prepare(
        `DELETE FROM ${t} WHERE key IN (SELECT key FROM ${t} WHERE expires_at <= ? ORDER BY expires_at LIMIT ${SWEEP_BATCH})`,
      ),
      claim,
      renewAll,
      batch: new SqliteBatch(db, briefly, this.busyTimeoutMs),
    };
  }

  private async openFile(filename: string): Promise<SqliteDatabaseLike> {
    // Loaded here, not at import: the in-memory and Redis paths must run without better-sqlite3.
    const sqlite = (await importRequired('SqliteStore', 'better-sqlite3', 12, () => import('better-sqlite3'))) as unknown as {
      default: new (filename: string) => SqliteDatabaseLike;
    };
    const db = new sqlite.default(filename);
    // WAL lets readers and one writer of several processes share the file.
    if (filename !== ':memory:') db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${this.synchronous}`);
    return db;
  }
}
