import { FAILURES } from '../../shared/messages/operator.messages.js';
import type { ClaimOutcome, IdempotencyClaim } from '../contract/idempotency-store.interface.js';
import type { SqlExecutor } from '../../shared/interfaces/idempotency-transactions.interface.js';
import { LaneBatch } from '../shared/lane.batch.js';
import { readRecordParts } from './postgres.large-records.js';
import { INLINE_RECORD_BYTES } from './postgres.schema.js';
import { NORMAL, type PoolLanes } from '../shared/pool.lanes.js';
import { held, type HeldRow } from '../shared/sql.rows.js';

type ClaimRow = { claimed: true } | ({ claimed: false; record_size: number | null; version: string } & HeldRow);

/** A claim waiting for its batch. */
interface ClaimAsk extends IdempotencyClaim {
  readonly key: string;
}

/** The most claims one statement carries: a batch stays far inside the statement timeout. */
const MAX_CLAIM_BATCH = 64;

/**
 * Records up to this size come back inline from a batch (at most 2 MiB in one answer, well inside
 * the statement's time bound); a larger one is read in parts afterwards. A claim alone still takes
 * up to {@link INLINE_RECORD_BYTES} inline.
 */
const BATCH_INLINE_BYTES = 32 * 1024;

/** How often a claim starts over when the large record it was reading in parts changed under it. */
const PART_READ_ATTEMPTS = 3;

/** Runs one statement on a connection its lane has already admitted. */
export type AdmittedSend = (text: string, values: unknown[]) => Promise<Record<string, unknown>[]>;

/**
 * `PostgresStore`'s claims: one call of the claim function each, sent together when they waited for
 * a connection together ({@link LaneBatch}), and a record over the inline size read in parts after.
 * A claim that waits on a row lock (its key's row held by a transaction still open: another pod's
 * claim of that key, or a phase of a run whose lease had lapsed) holds its batch up as long, at most
 * for the statement timeout; a statement that fails claims nothing, and each of its claims answers 503.
 */
export class PostgresClaims {
  private readonly batch: LaneBatch<ClaimAsk, ClaimRow>;

  /**
   * @param table the records table, qualified and quoted.
   * @param fn the claim function, qualified and quoted.
   * @param reads runs a statement in the normal lane (the parts of a large record).
   */
  constructor(
    private readonly table: string,
    private readonly fn: string,
    lanes: () => PoolLanes,
    private readonly send: AdmittedSend,
    private readonly reads: SqlExecutor,
  ) {
    this.batch = new LaneBatch(lanes, NORMAL, MAX_CLAIM_BATCH, (asks) => this.rows(asks));
  }

  async claim(key: string, claim: IdempotencyClaim): Promise<ClaimOutcome> {
    for (let attempt = 1; ; attempt++) {
      const row = await this.batch.add({ key, owner: claim.owner, fingerprint: claim.fingerprint, leaseMs: claim.leaseMs });
      if (row.claimed) return { state: 'claimed' };
      if (row.record !== null || row.record_size === null) return held(row);
      const record = await readRecordParts(this.reads, this.table, key, row.version, row.record_size);
      if (record) return held({ ...row, record });
      // The record changed (expired, taken over) while its parts were read: decide again.
      if (attempt >= PART_READ_ATTEMPTS) throw new Error(FAILURES.recordMoving);
    }
  }

  /**
   * One claim is the plain call; more are the claim function for each, in the order of their keys,
   * so two batches (of this pod or another) that share keys lock them in one order and cannot
   * deadlock. A key twice: the later call sees the earlier one's row (a volatile function's
   * statements see what the statement did before them), as a second statement would.
   */
  private async rows(asks: readonly ClaimAsk[]): Promise<ClaimRow[]> {
    if (asks.length === 1) {
      const [{ key, owner, fingerprint, leaseMs }] = asks;
      return (await this.send(`SELECT * FROM ${this.fn}($1, $2, $3, $4, $5)`, [
        key,
        owner,
        fingerprint,
        leaseMs,
        INLINE_RECORD_BYTES,
      ])) as unknown as ClaimRow[];
    }
    // Stable: two claims of one key keep the order they were asked in.
    const order = asks.map((_, i) => i).sort((a, b) => (asks[a].key < asks[b].key ? -1 : asks[a].key > asks[b].key ? 1 : 0));
    const sorted = order.map((i) => asks[i]);
    const rows = (await this.send(
      `SELECT u.i::int AS i, c.* FROM unnest($1::text[], $2::text[], $3::text[], $4::int[]) WITH ORDINALITY
         AS u(key, owner, fingerprint, lease_ms, i) CROSS JOIN LATERAL ${this.fn}(u.key, u.owner, u.fingerprint, u.lease_ms, $5) c`,
      [
        sorted.map((a) => a.key),
        sorted.map((a) => a.owner),
        sorted.map((a) => a.fingerprint),
        sorted.map((a) => a.leaseMs),
        BATCH_INLINE_BYTES,
      ],
    )) as unknown as (ClaimRow & { i: number })[];
    const answers: ClaimRow[] = [];
    for (const { i, ...row } of rows) answers[order[i - 1]] = row;
    return answers;
  }
}
