import { Logger } from '@nestjs/common';
import { MAX_TIMER_MS } from '../idempotency.constants.js';
import { CONFIG_ERRORS, LOGS, STORE_ERRORS } from '../idempotency.messages.js';
import type {
  ClaimOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
  IdempotencyStore,
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
import { postgresSchemaSql, type PostgresNames } from './postgres.schema.js';
import { DEFAULT_SWEEP_INTERVAL_MS, DEFAULT_TABLE_NAME, SWEEP_BATCH, SWEEP_BATCHES } from './sql-store.options.js';
import { LazyConnection } from './lazy.connection.js';
import { SqlSweeper } from './sql.sweeper.js';
import { held, type HeldRow } from './sql.rows.js';
import { encodeRecord } from './store-value.codec.js';

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

type ClaimRow = { claimed: true } | ({ claimed: false } & HeldRow);

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
  private readonly poolSize: number;
  private readonly sweeper: SqlSweeper;
  private readonly connection = new LazyConnection(() => this.connect());
  private owned = false;

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
    const [row] = (await this.run(`SELECT * FROM ${this.qualified('claim')}($1, $2, $3, $4)`, [
      key,
      claim.owner,
      claim.fingerprint,
      claim.leaseMs,
    ])) as unknown as ClaimRow[];
    if (row.claimed) return { state: 'claimed' };
    return held(row);
  }

  async ping(): Promise<void> {
    await this.run('SELECT 1', []);
  }

  async peek(key: string): Promise<PeekedEntry | undefined> {
    const [row] = (await this.run(
      `SELECT state, fingerprint, record, (extract(epoch FROM expires_at) * 1000)::float8 AS expires_at
       FROM ${this.qualified()} WHERE key = $1 AND expires_at > clock_timestamp()`,
      [key],
    )) as unknown as (HeldRow & { expires_at: number })[];
    return row && { ...held(row), expiresAt: Math.round(row.expires_at) };
  }

  async forget(key: string): Promise<boolean> {
    return this.fenced(`DELETE FROM ${this.qualified()} WHERE key = $1 AND expires_at > clock_timestamp()`, [key]);
  }

  /** The same statement as {@link completeIn}, on the store's own pool: one round trip either way. */
  async commit(key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean> {
    return this.completeIn({ query: (text, values) => this.run(text, values) }, key, owner, record, ttlMs);
  }

  /**
   * The fenced commit as one statement, here in the caller's transaction, its placeholders in order
   * for drivers that number them `?`. An UPDATE's row count is not in every driver's answer (TypeORM
   * hands back `[rows, count]` for one), so a SELECT counts the updated rows: always one row.
   */
  async completeIn(sql: SqlExecutor, key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean> {
    const [row] = (await sql.query(
      `WITH done AS (UPDATE ${this.qualified()} SET state = 1, owner = NULL, record = $1,
         expires_at = clock_timestamp() + $2::bigint * interval '1 millisecond'
       WHERE key = $3 AND owner = $4 AND state = 0 AND expires_at > clock_timestamp() RETURNING 1)
       SELECT count(*)::int AS completed FROM done`,
      [encodeRecord(record), ttlMs, key, owner],
    )) as { completed: number }[];
    return row.completed === 1;
  }

  async release(key: string, owner: string): Promise<boolean> {
    return this.fenced(
      `DELETE FROM ${this.qualified()} WHERE key = $1 AND owner = $2 AND state = 0 AND expires_at > clock_timestamp()`,
      [key, owner],
    );
  }

  async renew(key: string, owner: string, leaseMs: number): Promise<boolean> {
    return this.fenced(
      `UPDATE ${this.qualified()} SET expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond'
       WHERE key = $1 AND owner = $2 AND state = 0 AND expires_at > clock_timestamp()`,
      [key, owner, leaseMs],
    );
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
      const result = await pool.query({
        text: `DELETE FROM ${this.qualified()} WHERE key IN (
                 SELECT key FROM ${this.qualified()} WHERE expires_at < clock_timestamp()
                 ORDER BY expires_at LIMIT ${SWEEP_BATCH} FOR UPDATE SKIP LOCKED)`,
        query_timeout: this.timeoutMs,
      });
      deleted += result.rowCount ?? 0;
      if ((result.rowCount ?? 0) < SWEEP_BATCH) break;
    }
    return deleted;
  }

  private qualified(suffix?: string): string {
    const { schema, table } = this.names;
    return `"${schema}"."${suffix ? `${table}_${suffix}` : table}"`;
  }

  private async fenced(text: string, values: unknown[]): Promise<boolean> {
    const pool = await this.pool();
    const result = await pool.query({ text, values, query_timeout: this.timeoutMs });
    return result.rowCount === 1;
  }

  private async run(text: string, values: unknown[]): Promise<Record<string, unknown>[]> {
    const pool = await this.pool();
    return (await pool.query({ text, values, query_timeout: this.timeoutMs })).rows;
  }

  /** The pool, connected and with its schema. */
  private pool(): Promise<PostgresPoolLike> {
    return this.connection.get();
  }

  private async connect(): Promise<PostgresPoolLike> {
    const pool = this.options.pool ?? (await this.createPool());
    if (this.options.createSchema !== false) await this.createSchema(pool);
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
