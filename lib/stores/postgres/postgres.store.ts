import { Logger } from '@nestjs/common';
import type {
  ClaimOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
  IdempotencyStore,
  OwnedKey,
  PeekedEntry,
  StoreNeeds,
} from '../contract/idempotency-store.interface.js';
import type { SqlExecutor } from '../../shared/interfaces/idempotency-transactions.interface.js';
import type { AbandonedRun, PhaseAdvance, RecoveryPoint } from '../../shared/interfaces/recovery-point.interface.js';
import {
  DEFAULT_POOL_SIZE,
  type PostgresPoolLike,
  type PostgresStoreOptions,
  SERVER_FIRST_MS,
} from './postgres-store.options.js';
import { resolvePostgresOptions } from './postgres-options.resolver.js';
import { PostgresCompletions } from './postgres.completions.js';
import { PHASES_SUFFIX } from './postgres.phases-schema.js';
import { createPostgresPool } from './postgres.pool.js';
import { CLAIM_SUFFIX, derivedName, type PostgresNames } from './postgres.schema.js';
import { PostgresSchemaCheck } from './postgres.schema-check.js';
import { NORMAL, PoolLanes, RENEWAL, URGENT, type Lane } from '../shared/pool.lanes.js';
import { StatementNames } from './postgres.statement-names.js';
import { sweepExpired } from './postgres.sweep.js';
import { PostgresWakeups, SETTLED_CHANNEL } from './postgres.wakeups.js';
import { PostgresClaims } from './postgres.claims.js';
import { PostgresCommits } from './postgres.commits.js';
import { LazyConnection } from '../shared/lazy.connection.js';
import { SqlSweeper } from '../shared/sql.sweeper.js';
import { held, type HeldRow } from '../shared/sql.rows.js';
import { encodeRecord } from '../shared/store-value.codec.js';

/**
 * An {@link IdempotencyStore} on PostgreSQL (node-postgres 8), shared by every pod: one LOGGED table,
 * times from the database clock. A first request costs two round trips (claim-or-read, commit), a
 * replay or a conflict one; claims, or commits, that wait for a connection together share one.
 * Commit, release and renew change a row only while it holds the caller's live claim (its owner
 * token); expired rows are taken over by the next claim and swept in batches.
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
  private readonly wakeups: PostgresWakeups;
  private readonly completions: PostgresCompletions;
  private readonly schema: PostgresSchemaCheck;
  /** Set when `preparedStatements`. */
  private readonly statementNames: StatementNames | undefined;
  private readonly claims: PostgresClaims;
  private readonly commits: PostgresCommits;

  constructor(private readonly options: PostgresStoreOptions) {
    const resolved = resolvePostgresOptions(options);
    this.names = resolved.names;
    this.timeoutMs = resolved.statementTimeoutMs;
    this.readTimeoutMs = this.timeoutMs + SERVER_FIRST_MS;
    this.poolSize = resolved.poolSize;
    this.schema = new PostgresSchemaCheck(this.names, this.readTimeoutMs);
    this.statementNames = resolved.preparedStatements ? new StatementNames() : undefined;
    this.wakeups = new PostgresWakeups(options, this.logger);
    this.completions = new PostgresCompletions(this.qualified(), this.qualified(PHASES_SUFFIX));
    const send = async (text: string, values: unknown[]) => (await this.statement(await this.pool(), text, values)).rows;
    this.commits = new PostgresCommits(
      this.completions,
      () => this.lanes!,
      send,
      () => this.pool(),
      this.timeoutMs,
    );
    this.claims = new PostgresClaims(
      this.qualified(),
      this.qualified(CLAIM_SUFFIX),
      () => this.lanes!,
      send,
      this.executor(NORMAL),
    );
    this.sweeper = new SqlSweeper(resolved.sweepIntervalMs, () => this.sweep(), this.logger);
  }

  /** The DDL the store runs with `createSchema` (the default): migrations 001 to 004 for your names. */
  schemaSql(): string {
    return this.schema.sql();
  }

  /** Connects (and creates the schema unless told not to); the module calls it at startup. */
  async open(): Promise<void> {
    await this.pool();
  }

  async claim(key: string, claim: IdempotencyClaim): Promise<ClaimOutcome> {
    await this.pool();
    return this.claims.claim(key, claim);
  }

  /**
   * Answers when the tables, their keys and the claim function are as this release needs them, and
   * the recovery points' table too when `needs.recoveryPoints` (the module has `atomicPhases` routes).
   */
  async ping(needs?: StoreNeeds): Promise<void> {
    await this.schema.check(await this.pool(), needs);
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

  /** Its recovery point goes too: the next request with the key starts over. */
  async forget(key: string): Promise<boolean> {
    await this.pool();
    if (this.schema.hasPhases) await this.run(NORMAL, `DELETE FROM ${this.qualified(PHASES_SUFFIX)} WHERE key = $1`, [key]);
    return this.fenced(NORMAL, `DELETE FROM ${this.qualified()} WHERE key = $1 AND expires_at > clock_timestamp()`, [key]);
  }

  /** One round trip, as {@link completeIn} is; commits that wait for a connection together share one. */
  async commit(key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean> {
    await this.pool();
    return this.commits.commit({ key, owner, value: encodeRecord(record), ttlMs });
  }

  /** The fenced commit as one statement, here in the caller's transaction. */
  async completeIn(sql: SqlExecutor, key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean> {
    return this.completions.complete(sql, key, owner, encodeRecord(record), ttlMs, true);
  }

  /** Recovery points (`atomicPhases`): read on the pool, advanced and finished in the phase's transaction. */
  recoveryPoint(key: string): Promise<RecoveryPoint | undefined> {
    return this.completions.read(this.executor(NORMAL), key);
  }

  abandonedRuns(idleMs: number, limit: number): Promise<AbandonedRun[]> {
    return this.completions.abandoned(this.executor(NORMAL), idleMs, limit);
  }

  advanceIn(sql: SqlExecutor, key: string, owner: string, point: PhaseAdvance): Promise<boolean> {
    return this.completions.advance(sql, key, owner, point);
  }

  finishIn(sql: SqlExecutor, key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean> {
    return this.completions.finish(sql, key, owner, encodeRecord(record), ttlMs);
  }

  async release(key: string, owner: string): Promise<boolean> {
    return this.fenced(URGENT, `DELETE FROM ${this.qualified()} WHERE key = $1 AND owner = $2 AND state = 0`, [key, owner]);
  }

  async renew(key: string, owner: string, leaseMs: number): Promise<boolean> {
    return (await this.renewAll([{ key, owner }], leaseMs))[0];
  }

  /** Every claim in one UPDATE, one round trip per tick; a lapsed claim nobody took is renewed too. */
  renewAll(claims: readonly OwnedKey[], leaseMs: number): Promise<boolean[]> {
    return this.completions.renew(this.executor(RENEWAL), claims, leaseMs);
  }

  /** Stops the sweep and the LISTEN connection; closes the pool only when this store created it. */
  async close(): Promise<void> {
    this.sweeper.stop();
    await this.wakeups.close();
    const ready = this.connection.take();
    if (!this.owned || !ready) return;
    const pool = await ready.catch(() => undefined);
    await pool?.end();
  }

  /** Deletes expired rows in batches; `FOR UPDATE SKIP LOCKED` lets pods sweep at once without waiting. */
  async sweep(): Promise<number> {
    await this.pool();
    const query = (text: string) => this.query(NORMAL, text, []);
    const phases = this.schema.hasPhases ? await sweepExpired(query, this.qualified(PHASES_SUFFIX)) : 0;
    return phases + (await sweepExpired(query, this.qualified()));
  }

  /** NOTIFY through the pool: every process's one LISTEN connection hears it (`inFlight: 'wait'`). */
  async announce(key: string): Promise<void> {
    await this.run(URGENT, `SELECT pg_notify('${SETTLED_CHANNEL}', $1)`, [key]);
  }

  listen(listener: (key: string) => void, resumed?: () => void): Promise<void> {
    return this.wakeups.listen(listener, resumed);
  }

  private qualified(suffix?: string): string {
    const { schema, table } = this.names;
    return `"${schema}"."${suffix ? derivedName(table, suffix) : table}"`;
  }

  private async fenced(lane: Lane, text: string, values: unknown[]): Promise<boolean> {
    return (await this.query(lane, text, values)).rowCount === 1;
  }

  /** The store's pool as a {@link SqlExecutor}, in `lane`. */
  private executor(lane: Lane): SqlExecutor {
    return { query: (text, values) => this.run(lane, text, values) };
  }

  private async run(lane: Lane, text: string, values: unknown[]): Promise<Record<string, unknown>[]> {
    return (await this.query(lane, text, values)).rows;
  }

  private async query(lane: Lane, text: string, values: unknown[]) {
    const pool = await this.pool();
    return this.lanes!.run(lane, () => this.statement(pool, text, values));
  }

  private statement(pool: PostgresPoolLike, text: string, values: unknown[]) {
    return pool.query({ text, values, query_timeout: this.readTimeoutMs, name: this.statementNames?.of(text) });
  }

  /** The pool, connected and with its schema. */
  private pool(): Promise<PostgresPoolLike> {
    return this.connection.get();
  }

  private async connect(): Promise<PostgresPoolLike> {
    const pool =
      this.options.pool ?? (await createPostgresPool(this.options.connectionString, this.poolSize, this.timeoutMs, this.logger));
    this.owned = !this.options.pool;
    // The application's pool serves its own queries too: its size, not ours, bounds what we hand it.
    const size = this.options.pool ? ((pool as { options?: { max?: number } }).options?.max ?? DEFAULT_POOL_SIZE) : this.poolSize;
    this.lanes = new PoolLanes(size, this.timeoutMs);
    await this.schema.open(pool, this.options.createSchema !== false, this.logger);
    this.sweeper.start();
    return pool;
  }
}
