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
import { LazyConnection } from '../shared/lazy.connection.js';
import { NORMAL, PoolLanes, RENEWAL, URGENT, type Lane } from '../shared/pool.lanes.js';
import { SWEEP_BATCH, SWEEP_BATCHES } from '../shared/sql-store.options.js';
import { SqlSweeper } from '../shared/sql.sweeper.js';
import { held } from '../shared/sql.rows.js';
import { encodeRecord } from '../shared/store-value.codec.js';
import { resolveMySqlOptions } from './mysql-options.resolver.js';
import { lockWaitSeconds, type MySqlPoolLike, type MySqlStoreOptions, MYSQL_SERVER_FIRST_MS } from './mysql-store.options.js';
import { type ClaimRow, firstRows, heldRow, MySqlClaims } from './mysql.claims.js';
import { createMySqlPool } from './mysql.pool.js';
import { MySqlRenewals } from './mysql.renewals.js';
import { completeProcedure, mysqlSchemaSql } from './mysql.schema.js';
import { openMySqlSchema, verifyMySqlTable } from './mysql.verifier.js';

/** What mysql2 answers for a statement that returns no rows. */
interface ResultHeader {
  affectedRows: number;
}

/**
 * An {@link IdempotencyStore} on MySQL 8.0.29+ or MariaDB 10.6+ (mysql2 3), shared by every pod: one
 * InnoDB table with binary keys, times from the database clock (`UTC_TIMESTAMP(3)`). A first request
 * costs two round trips (the claim procedure, the commit), a replay or a conflict one. Commit,
 * release and renew change a row only while it holds the caller's claim (its owner token); expired
 * rows are taken over by the next claim and swept in batches. `transactional: true` routes complete
 * their record in the application's own MySQL transaction.
 */
export class MySqlStore implements IdempotencyStore {
  private readonly logger = new Logger('MySqlStore');
  private readonly table: string;
  private readonly timeoutMs: number;
  /** The client's bound on a statement: half a second after the server's lock wait, in whole seconds. */
  private readonly readTimeoutMs: number;
  private readonly poolSize: number;
  private readonly sweeper: SqlSweeper;
  private readonly connection = new LazyConnection(() => this.connect());
  private owned = false;
  private lanes: PoolLanes | undefined;
  private readonly renewals: MySqlRenewals;
  private readonly claims: MySqlClaims;
  private needs: StoreNeeds | undefined;

  constructor(private readonly options: MySqlStoreOptions) {
    const resolved = resolveMySqlOptions(options);
    this.table = resolved.table;
    this.timeoutMs = resolved.statementTimeoutMs;
    this.readTimeoutMs = lockWaitSeconds(this.timeoutMs) * 1000 + MYSQL_SERVER_FIRST_MS;
    this.poolSize = resolved.poolSize;
    this.renewals = new MySqlRenewals(this.table, (sql, values) => this.send(RENEWAL, sql, values));
    this.claims = new MySqlClaims(this.table, (sql, values) => this.send(NORMAL, sql, values));
    this.sweeper = new SqlSweeper(resolved.sweepIntervalMs, () => this.sweep(), this.logger);
  }

  /**
   * The DDL the store runs with `createSchema` (the default), as a script for the `mysql` client
   * (its `DELIMITER` lines included): `sql/mysql/001_idempotency_records.sql` for your table name.
   */
  schemaSql(): string {
    return mysqlSchemaSql(this.table);
  }

  /**
   * Connects, creates the schema unless told not to, and checks the table and the server: the module
   * calls it at startup with the largest response it keeps, which must fit `max_allowed_packet`.
   */
  async open(needs?: StoreNeeds): Promise<void> {
    this.needs = needs;
    await this.pool();
  }

  async claim(key: string, claim: IdempotencyClaim): Promise<ClaimOutcome> {
    return this.claims.claim(key, claim);
  }

  /** Answers when the table and its procedures are as this release needs them. */
  async ping(): Promise<void> {
    await this.pool();
    await verifyMySqlTable((sql, values) => this.rows(NORMAL, sql, values), this.table, undefined);
  }

  async peek(key: string): Promise<PeekedEntry | undefined> {
    const [row] = (await this.rows(
      NORMAL,
      `SELECT state, fingerprint, record, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', expires_at) DIV 1000 AS expires_at
       FROM \`${this.table}\` WHERE \`key\` = ? AND expires_at > UTC_TIMESTAMP(3)`,
      [key],
    )) as (ClaimRow & { expires_at: number | string })[];
    return row && { ...held(heldRow(row)), expiresAt: Number(row.expires_at) };
  }

  async forget(key: string): Promise<boolean> {
    return this.changed(NORMAL, `DELETE FROM \`${this.table}\` WHERE \`key\` = ? AND expires_at > UTC_TIMESTAMP(3)`, [key]);
  }

  async commit(key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean> {
    return this.changed(
      URGENT,
      `UPDATE \`${this.table}\` SET state = 1, owner = NULL, record = ?, expires_at = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND
       WHERE \`key\` = ? AND owner = ? AND state = 0`,
      [encodeRecord(record), ttlMs * 1000, key, owner],
    );
  }

  /**
   * The fenced commit in the caller's transaction, within the claim's lease: a procedure, so that
   * its answer is a row through any driver. `sql` takes `?` placeholders (it is a MySQL connection).
   */
  async completeIn(sql: SqlExecutor, key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean> {
    const result = await sql.query(`CALL \`${completeProcedure(this.table)}\`(?, ?, ?, ?)`, [
      key,
      owner,
      encodeRecord(record),
      ttlMs,
    ]);
    const [row] = firstRows(result) as { completed: number | string }[];
    return Number(row?.completed) === 1;
  }

  async release(key: string, owner: string): Promise<boolean> {
    return this.changed(URGENT, `DELETE FROM \`${this.table}\` WHERE \`key\` = ? AND owner = ? AND state = 0`, [key, owner]);
  }

  async renew(key: string, owner: string, leaseMs: number): Promise<boolean> {
    return (await this.renewAll([{ key, owner }], leaseMs))[0];
  }

  /** Every claim in one UPDATE per 64, a lapsed claim nobody took included. */
  async renewAll(claims: readonly OwnedKey[], leaseMs: number): Promise<boolean[]> {
    await this.pool();
    return this.renewals.renew(claims, leaseMs);
  }

  /** Stops the sweep; closes the pool only when this store created it. */
  async close(): Promise<void> {
    this.sweeper.stop();
    const ready = this.connection.take();
    if (!this.owned || !ready) return;
    const pool = await ready.catch(() => undefined);
    await pool?.end();
  }

  /**
   * Deletes expired rows in batches of a thousand, oldest first. On the store's own pool
   * (READ COMMITTED) it locks only the expired rows it deletes, never a live claim or a gap beside one.
   */
  async sweep(): Promise<number> {
    let deleted = 0;
    for (let batch = 0; batch < SWEEP_BATCHES; batch++) {
      const header = (await this.send(
        NORMAL,
        `DELETE FROM \`${this.table}\` WHERE expires_at <= UTC_TIMESTAMP(3) ORDER BY expires_at LIMIT ${SWEEP_BATCH}`,
        [],
      )) as ResultHeader;
      deleted += header.affectedRows;
      if (header.affectedRows < SWEEP_BATCH) break;
    }
    return deleted;
  }

  private async changed(lane: Lane, sql: string, values: unknown[]): Promise<boolean> {
    return ((await this.send(lane, sql, values)) as ResultHeader).affectedRows >= 1;
  }

  private async rows(lane: Lane, sql: string, values: unknown[]): Promise<Record<string, unknown>[]> {
    return (await this.send(lane, sql, values)) as Record<string, unknown>[];
  }

  /** One prepared statement on the pool, admitted by its lane: the rows, or mysql2's result header. */
  private async send(lane: Lane, sql: string, values: unknown[]): Promise<unknown> {
    const pool = await this.pool();
    const [result] = await this.lanes!.run(lane, () => pool.execute({ sql, timeout: this.readTimeoutMs }, values));
    return result;
  }

  /** The pool, connected and with its schema. */
  private pool(): Promise<MySqlPoolLike> {
    return this.connection.get();
  }

  private async connect(): Promise<MySqlPoolLike> {
    const pool = this.options.pool ?? (await createMySqlPool(this.options.uri!, this.poolSize, this.timeoutMs, this.logger));
    this.owned = !this.options.pool;
    // The application's pool serves its own queries too: its size, not ours, bounds what we hand it.
    const size = this.options.pool
      ? ((pool as { pool?: { config?: { connectionLimit?: number } } }).pool?.config?.connectionLimit ?? this.poolSize)
      : this.poolSize;
    this.lanes = new PoolLanes(size, this.timeoutMs, 'MySQL');
    try {
      await openMySqlSchema(pool, this.table, {
        create: this.options.createSchema !== false,
        timeoutMs: this.readTimeoutMs,
        maxResponseBytes: this.needs?.maxResponseBytes,
      });
    } catch (err) {
      if (this.owned) await pool.end().catch(() => undefined);
      throw err;
    }
    this.sweeper.start();
    return pool;
  }
}
