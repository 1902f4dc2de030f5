import { Logger } from '@nestjs/common';
import { MAX_TIMER_MS } from '../idempotency.constants.js';
import { CONFIG_ERRORS, LOGS, STORE_ERRORS } from '../idempotency.messages.js';
import type {
  ClaimOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
  IdempotencyStore,
  OwnedKey,
  PeekedEntry,
} from '../interfaces/idempotency-store.interface.js';
import type { SqlExecutor } from '../interfaces/idempotency-transactions.interface.js';
import { fail, integerIn, refuseUnknownKeys, sqlIdentifier } from '../options/option.validators.js';
import {
  DEFAULT_POOL_SIZE,
  DEFAULT_POSTGRES_SCHEMA,
  DEFAULT_STATEMENT_TIMEOUT_MS,
  type PostgresPoolLike,
  type PostgresStoreOptions,
} from './postgres-store.options.js';
import { CLAIM_SUFFIX, derivedName, INLINE_RECORD_BYTES, postgresSchemaSql, type PostgresNames } from './postgres.schema.js';
import { NORMAL, PoolLanes, RENEWAL, URGENT, type Lane } from './pool.lanes.js';
import { DEFAULT_SWEEP_INTERVAL_MS, DEFAULT_TABLE_NAME, SWEEP_BATCH, SWEEP_BATCHES } from './sql-store.options.js';
import { LazyConnection } from './lazy.connection.js';
import { SqlSweeper } from './sql.sweeper.js';
import { held, type HeldRow } from './sql.rows.js';
import { encodeRecord } from './store-value.codec.js';

/** The columns (and types, as `format_type` names them) the store reads and writes. */
const POSTGRES_COLUMNS: Readonly<Record<string, string>> = {
  key: 'text',
  fingerprint: 'text',
  state: 'smallint',
  owner: 'text',
  expires_at: 'timestamp with time zone',
  record: 'bytea',
};

/** A record handed to {@link PostgresStore.completeIn} only for its already encoded value. */
const SIZED: IdempotencyRecord = { fingerprint: '', response: { status: 0, headers: {}, body: Buffer.alloc(0) } };

const OPTION_KEYS = [
  'connectionString',
  'pool',
  'schema',
  'tableName',
  'createSchema',
  'sweepIntervalMs',
  'statementTimeoutMs',
  'poolSize',
] as const;

type ClaimRow = { claimed: true } | ({ claimed: false; record_size: number | null; version: string } & HeldRow);

/**
 * How much longer the client waits than the server's `statement_timeout`. The server's cancel
 * guarantees the statement had no effect; the client's own timeout does not (the statement runs on,
 * and a claim answered 503 could still land once a lock it waited on is released, holding the key
 * for a lease with no handler). So the server's comes first wherever it can answer, and the client's
 * is left for a server that no longer does.
 */
const SERVER_FIRST_MS = 500;

/** A record larger than this is committed on a connection of its own with a statement timeout scaled to its size. */
const LARGE_RECORD_BYTES = 1 << 20;
/** The slowest transfer a large record's statement is allowed, in bytes per ms (8 MB/s). */
const BYTES_PER_MS = 8_000;
/** How often a claim starts over when the large record it was reading in parts changed under it. */
const PART_READ_ATTEMPTS = 3;
/** The parts of a node-postgres pool client a large commit uses. */
interface PoolClientLike {
  query(config: { text: string; values?: unknown[]; query_timeout?: number }): Promise<{ rows: Record<string, unknown>[] }>;
  release(err?: Error | boolean): void;
}

/**
 * An {@link IdempotencyStore} on PostgreSQL (node-postgres 8), shared by every pod: one LOGGED table,
 * times from the database clock. A first request costs two round trips (claim-or-read, commit), a
 * replay or a conflict one. Commit, release and renew change a row only while it holds the caller's
 * live claim (its owner token); expired rows are taken over by the next claim and swept in batches.
 */
export class PostgresStore implements IdempotencyStore {
  private readonly logger = new Logger('PostgresStore');
  private readonly names: PostgresNames;
  private readonly timeoutMs: number;
  /** The client's bound on a statement: {@link SERVER_FIRST_MS} after the server's. */
  private readonly readTimeoutMs: number;
  private readonly poolSize: number;
  private readonly sweeper: SqlSweeper;
  private readonly connection = new LazyConnection(() => this.connect());
  private owned = false;
  private lanes: PoolLanes | undefined;

  constructor(private readonly options: PostgresStoreOptions) {
    const where = 'PostgresStore';
    if (options === null || typeof options !== 'object') fail(where, CONFIG_ERRORS.notAnObject);
    refuseUnknownKeys(where, options, OPTION_KEYS, undefined);
    if ((options.connectionString === undefined) === (options.pool === undefined)) fail(where, CONFIG_ERRORS.postgresTarget);
    const schema = sqlIdentifier(where, 'schema', options.schema ?? DEFAULT_POSTGRES_SCHEMA);
    const table = sqlIdentifier(where, 'tableName', options.tableName ?? DEFAULT_TABLE_NAME);
    this.names = { schema, table };
    this.timeoutMs = integerIn(
      where,
      'statementTimeoutMs',
      options.statementTimeoutMs,
      DEFAULT_STATEMENT_TIMEOUT_MS,
      1,
      MAX_TIMER_MS,
    );
    this.readTimeoutMs = this.timeoutMs + SERVER_FIRST_MS;
    this.poolSize = integerIn(where, 'poolSize', options.poolSize, DEFAULT_POOL_SIZE, 1, 1000);
    const interval = integerIn(where, 'sweepIntervalMs', options.sweepIntervalMs, DEFAULT_SWEEP_INTERVAL_MS, 0, MAX_TIMER_MS);
    this.sweeper = new SqlSweeper(interval, () => this.sweep(), this.logger);
  }

  /** The DDL the store runs with `createSchema` (the default): for a migration of your own. */
  schemaSql(): string {
    return postgresSchemaSql(this.names);
  }

  /** Connects (and creates the schema unless told not to); the module calls it at startup. */
  async open(): Promise<void> {
    await this.pool();
  }

  async claim(key: string, claim: IdempotencyClaim): Promise<ClaimOutcome> {
    for (let attempt = 1; ; attempt++) {
      const [row] = (await this.run(NORMAL, `SELECT * FROM ${this.qualified(CLAIM_SUFFIX)}($1, $2, $3, $4, $5)`, [
        key,
        claim.owner,
        claim.fingerprint,
        claim.leaseMs,
        INLINE_RECORD_BYTES,
      ])) as unknown as ClaimRow[];
      if (row.claimed) return { state: 'claimed' };
      if (row.record !== null || row.record_size === null) return held(row);
      const record = await this.readParts(key, row.version, row.record_size);
      if (record) return held({ ...row, record });
      // The record changed (expired, taken over) while its parts were read: decide again.
      if (attempt >= PART_READ_ATTEMPTS) throw new Error(STORE_ERRORS.recordMoving);
    }
  }

  /** A large record, read in parts of its row version `version`; `undefined` when the row changed. */
  private async readParts(key: string, version: string, size: number): Promise<Buffer | undefined> {
    const parts: Buffer[] = [];
    for (let from = 0; from < size; from += INLINE_RECORD_BYTES) {
      const [row] = (await this.run(
        NORMAL,
        `SELECT substring(record FROM $2 FOR $3) AS part FROM ${this.qualified()}
         WHERE key = $1 AND xmin::text = $4 AND expires_at > clock_timestamp()`,
        [key, from + 1, INLINE_RECORD_BYTES, version],
      )) as { part: Buffer }[];
      if (!row) return undefined;
      parts.push(row.part);
    }
    return Buffer.concat(parts, size);
  }

  /** Answers when the table, its key and the claim function are as this release needs them. */
  async ping(): Promise<void> {
    await this.verify(await this.pool());
  }

  async peek(key: string): Promise<PeekedEntry | undefined> {
    const [row] = (await this.run(
      NORMAL,
      `SELECT state, fingerprint, record, (extract(epoch FROM expires_at) * 1000)::float8 AS expires_at
       FROM ${this.qualified()} WHERE key = $1 AND expires_at > clock_timestamp()`,
      [key],
    )) as unknown as (HeldRow & { expires_at: number })[];
    return row && { ...held(row), expiresAt: Math.round(row.expires_at) };
  }

  async forget(key: string): Promise<boolean> {
    return this.fenced(NORMAL, `DELETE FROM ${this.qualified()} WHERE key = $1 AND expires_at > clock_timestamp()`, [key]);
  }

  /**
   * The same statement as {@link completeIn}, on the store's own pool: one round trip either way, in
   * the urgent lane (a finished handler's commit never waits behind new claims). A large record gets
   * a connection of its own whose statement timeout is scaled to its size.
   */
  async commit(key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean> {
    const value = encodeRecord(record);
    if (value.length > LARGE_RECORD_BYTES) return this.commitLarge(key, owner, value, ttlMs);
    return this.completeIn({ query: (text, values) => this.run(URGENT, text, values) }, key, owner, record, ttlMs, value);
  }

  private async commitLarge(key: string, owner: string, value: Buffer, ttlMs: number): Promise<boolean> {
    const pool = await this.pool();
    if (!pool.connect) {
      return this.completeIn({ query: (text, values) => this.run(URGENT, text, values) }, key, owner, SIZED, ttlMs, value);
    }
    const timeoutMs = this.timeoutMs + Math.ceil(value.length / BYTES_PER_MS);
    return this.lanes!.run(URGENT, async () => {
      const client = (await pool.connect!()) as PoolClientLike;
      try {
        await client.query({ text: `SET statement_timeout = ${timeoutMs}` });
        const done = await this.completeIn(
          {
            query: async (text, values) =>
              (await client.query({ text, values, query_timeout: timeoutMs + SERVER_FIRST_MS })).rows,
          },
          key,
          owner,
          SIZED,
          ttlMs,
          value,
        );
        await client.query({ text: 'RESET statement_timeout' });
        client.release();
        return done;
      } catch (err) {
        // A connection whose timeout may still be the long one never goes back to the pool.
        client.release(err as Error);
        throw err;
      }
    });
  }

  /**
   * The fenced commit as one statement, here in the caller's transaction, its placeholders in order
   * for drivers that number them `?`. An UPDATE's row count is not in every driver's answer (TypeORM
   * hands back `[rows, count]` for one), so a SELECT counts the updated rows: always one row.
   */
  async completeIn(
    sql: SqlExecutor,
    key: string,
    owner: string,
    record: IdempotencyRecord,
    ttlMs: number,
    value: Buffer = encodeRecord(record),
  ): Promise<boolean> {
    const [row] = (await sql.query(
      `WITH done AS (UPDATE ${this.qualified()} SET state = 1, owner = NULL, record = $1,
         expires_at = clock_timestamp() + $2::bigint * interval '1 millisecond'
       WHERE key = $3 AND owner = $4 AND state = 0 AND expires_at > clock_timestamp() RETURNING 1)
       SELECT count(*)::int AS completed FROM done`,
      [value, ttlMs, key, owner],
    )) as { completed: number }[];
    return row.completed === 1;
  }

  async release(key: string, owner: string): Promise<boolean> {
    return this.fenced(
      URGENT,
      `DELETE FROM ${this.qualified()} WHERE key = $1 AND owner = $2 AND state = 0 AND expires_at > clock_timestamp()`,
      [key, owner],
    );
  }

  async renew(key: string, owner: string, leaseMs: number): Promise<boolean> {
    return (await this.renewAll([{ key, owner }], leaseMs))[0];
  }

  /** Every claim in one UPDATE: one round trip per tick, whatever the number of running handlers. */
  async renewAll(claims: readonly OwnedKey[], leaseMs: number): Promise<boolean[]> {
    const rows = (await this.run(
      RENEWAL,
      `UPDATE ${this.qualified()} AS r SET expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond'
       FROM unnest($1::text[], $2::text[]) AS c(key, owner)
       WHERE r.key = c.key AND r.owner = c.owner AND r.state = 0 AND r.expires_at > clock_timestamp()
       RETURNING r.key, r.owner`,
      [claims.map((c) => c.key), claims.map((c) => c.owner), leaseMs],
    )) as { key: string; owner: string }[];
    // An owner holds no newline (a UUID), so owner, newline, key names one pair alone.
    const renewed = new Set(rows.map((r) => `${r.owner}\n${r.key}`));
    return claims.map((c) => renewed.has(`${c.owner}\n${c.key}`));
  }

  /** Stops the sweep; closes the pool only when this store created it. */
  async close(): Promise<void> {
    this.sweeper.stop();
    const ready = this.connection.take();
    if (!this.owned || !ready) return;
    const pool = await ready.catch(() => undefined);
    await pool?.end();
  }

  /** Deletes expired rows in batches; `FOR UPDATE SKIP LOCKED` lets pods sweep at once without waiting. */
  async sweep(): Promise<number> {
    let deleted = 0;
    for (let batch = 0; batch < SWEEP_BATCHES; batch++) {
      const pool = await this.pool();
      const result = await this.lanes!.run(NORMAL, () =>
        pool.query({
          text: `DELETE FROM ${this.qualified()} WHERE key IN (
                 SELECT key FROM ${this.qualified()} WHERE expires_at < clock_timestamp()
                 ORDER BY expires_at LIMIT ${SWEEP_BATCH} FOR UPDATE SKIP LOCKED)`,
          query_timeout: this.readTimeoutMs,
        }),
      );
      deleted += result.rowCount ?? 0;
      if ((result.rowCount ?? 0) < SWEEP_BATCH) break;
    }
    return deleted;
  }

  private qualified(suffix?: string): string {
    const { schema, table } = this.names;
    return `"${schema}"."${suffix ? derivedName(table, suffix) : table}"`;
  }

  private async fenced(lane: Lane, text: string, values: unknown[]): Promise<boolean> {
    const pool = await this.pool();
    const result = await this.lanes!.run(lane, () => pool.query({ text, values, query_timeout: this.readTimeoutMs }));
    return result.rowCount === 1;
  }

  private async run(lane: Lane, text: string, values: unknown[]): Promise<Record<string, unknown>[]> {
    const pool = await this.pool();
    return (await this.lanes!.run(lane, () => pool.query({ text, values, query_timeout: this.readTimeoutMs }))).rows;
  }

  /** The pool, connected and with its schema. */
  private pool(): Promise<PostgresPoolLike> {
    return this.connection.get();
  }

  private async connect(): Promise<PostgresPoolLike> {
    const pool = this.options.pool ?? (await this.createPool());
    // The application's pool serves its own queries too: its size, not ours, bounds what we hand it.
    const size = this.options.pool ? ((pool as { options?: { max?: number } }).options?.max ?? DEFAULT_POOL_SIZE) : this.poolSize;
    this.lanes = new PoolLanes(size, this.timeoutMs);
    if (this.options.createSchema !== false) await this.createSchema(pool);
    await this.verify(pool);
    this.sweeper.start();
    return pool;
  }

  private async createPool(): Promise<PostgresPoolLike> {
    // Loaded here, not at import: the in-memory and Redis paths must run without pg installed.
    const pg = (await import('pg')) as unknown as { default: { Pool: new (config: object) => PostgresPoolLike } };
    const pool = new pg.default.Pool({
      connectionString: this.options.connectionString,
      max: this.poolSize,
      statement_timeout: this.timeoutMs,
      connectionTimeoutMillis: this.timeoutMs,
      idleTimeoutMillis: 30_000,
    });
    // An idle connection whose backend dies emits 'error' on the pool: unheard, it would end the process.
    pool.on('error', (err: Error) => this.logger.error(LOGS.postgresIdleError(err.message)));
    this.owned = true;
    return pool;
  }

  /**
   * Refuses a table this release cannot work with (made by hand or by an older migration): a wrong
   * or missing column, no primary key on `key`, no claim function. Without it, such a table passed
   * the start and answered 503 to every request, or stored a first response and 503 to every retry.
   */
  private async verify(pool: PostgresPoolLike): Promise<void> {
    const { schema, table } = this.names;
    const { rows } = await pool.query({
      text: `SELECT to_regclass($1) IS NOT NULL AS found,
         (SELECT coalesce(json_object_agg(a.attname, format_type(a.atttypid, a.atttypmod)), '{}')
            FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
         EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
            WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indnatts = 1 AND a.attname = 'key') AS keyed,
         to_regprocedure($2) IS NOT NULL AS claims`,
      values: [`"${schema}"."${table}"`, `${this.qualified(CLAIM_SUFFIX)}(text, text, text, integer, integer)`],
      query_timeout: this.readTimeoutMs,
    });
    const [found] = rows as { found: boolean; columns: Record<string, string>; keyed: boolean; claims: boolean }[];
    const problems: string[] = [];
    if (!found.found) problems.push(STORE_ERRORS.noTable);
    else {
      for (const [column, type] of Object.entries(POSTGRES_COLUMNS)) {
        const got = found.columns[column];
        if (got !== type) problems.push(STORE_ERRORS.column(column, type, got));
      }
      if (!found.keyed) problems.push(STORE_ERRORS.noPrimaryKey);
    }
    if (!found.claims) problems.push(STORE_ERRORS.noClaimFunction(this.qualified(CLAIM_SUFFIX)));
    if (problems.length) throw new Error(STORE_ERRORS.schemaMismatch('PostgresStore', `"${schema}"."${table}"`, problems));
  }

  /** Two pods starting at once may both create the schema: a lost race is retried once the winner is done. */
  private async createSchema(pool: PostgresPoolLike): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await pool.query({ text: this.schemaSql() });
        return;
      } catch (err) {
        if (attempt >= 3) throw new Error(STORE_ERRORS.postgresSchema((err as Error).message), { cause: err });
        await new Promise((r) => setTimeout(r, 50 * attempt));
      }
    }
  }
}
