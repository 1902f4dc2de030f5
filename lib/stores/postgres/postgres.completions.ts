import { FINISHED } from '../../shared/idempotency.constants.js';
import type { AbandonedRun, PhaseAdvance, RecoveryPoint } from '../../shared/interfaces/recovery-point.interface.js';
import type { OwnedKey } from '../contract/idempotency-store.interface.js';
import type { SqlExecutor } from '../../shared/interfaces/idempotency-transactions.interface.js';
import { jsonbSafe } from './postgres.jsonb.js';

/** What a recovery point's row is read as. */
const POINT_COLUMNS = 'fingerprint, results::text AS results, texts::text AS texts, workflow, input::text AS input, input_text';

interface PointRow {
  fingerprint: string;
  results: string;
  texts: string | null;
  workflow: string | null;
  input: string | null;
  input_text: string | null;
}

/**
 * The results by name, with the phases in commit order: first those only an earlier release wrote
 * (`jsonb`'s order), then this release's exact texts in the order they were committed.
 */
function pointOf(row: PointRow): RecoveryPoint {
  const stored = JSON.parse(row.results) as Record<string, unknown>;
  const exact = JSON.parse(row.texts ?? '[]') as [string, string][];
  const named = new Set(exact.map(([phase]) => phase));
  const phases = [...Object.keys(stored).filter((phase) => !named.has(phase)), ...exact.map(([phase]) => phase)];
  const results: Record<string, unknown> = {};
  for (const phase of phases) results[phase] = stored[phase];
  for (const [phase, json] of exact) results[phase] = JSON.parse(json);
  const point = { fingerprint: row.fingerprint, results, phases };
  if (row.workflow === null) return point;
  return { ...point, workflow: row.workflow, input: JSON.parse(row.input_text ?? row.input ?? 'null') as unknown };
}

/** One claim's commit, as {@link PostgresCompletions.completeAll} takes it. */
export interface Completion {
  readonly key: string;
  readonly owner: string;
  readonly value: Buffer;
  readonly ttlMs: number;
}

/** The transactional completion's fence on the clock: under REPEATABLE READ a lapsed claim another took must match nothing. */
const IN_LEASE = ' AND expires_at > clock_timestamp()';

/**
 * The fenced statements on a claim: they renew it, end it, or advance its recovery point, on the records table
 * `records` and its phases table `phases`. Each is one statement whose placeholders come in order,
 * for drivers that number them `?`; an UPDATE's row count is not in every driver's answer (TypeORM
 * hands back `[rows, count]` for one), so a SELECT counts the changed rows: always one row.
 */
export class PostgresCompletions {
  constructor(
    private readonly records: string,
    private readonly phases: string,
  ) {}

  async renew(sql: SqlExecutor, claims: readonly OwnedKey[], leaseMs: number): Promise<boolean[]> {
    const rows = (await sql.query(
      `UPDATE ${this.records} AS r SET expires_at = clock_timestamp() + $1::bigint * interval '1 millisecond'
       FROM unnest($2::text[], $3::text[]) AS c(key, owner)
       WHERE r.key = c.key AND r.owner = c.owner AND r.state = 0
       RETURNING r.key, r.owner`,
      [leaseMs, claims.map((c) => c.key), claims.map((c) => c.owner)],
    )) as { key: string; owner: string }[];
    // An owner holds no newline (a UUID), so owner, newline, key names one pair alone.
    const renewed = new Set(rows.map((r) => `${r.owner}\n${r.key}`));
    return claims.map((c) => renewed.has(`${c.owner}\n${c.key}`));
  }

  /**
   * A commit lands on the owner's claim, lapsed or not; a completion in the handler's transaction only
   * `inLease`: `transactionTimeoutMs`, never renewed, past which the work rolls back.
   */
  async complete(sql: SqlExecutor, key: string, owner: string, value: Buffer, ttlMs: number, inLease = false): Promise<boolean> {
    const [row] = (await sql.query(
      `WITH done AS (UPDATE ${this.records} SET state = 1, owner = NULL, record = $1,
         expires_at = clock_timestamp() + $2::bigint * interval '1 millisecond'
       WHERE key = $3 AND owner = $4 AND state = 0${inLease ? IN_LEASE : ''} RETURNING 1)
       SELECT count(*)::int AS completed FROM done`,
      [value, ttlMs, key, owner],
    )) as { completed: number }[];
    return row.completed === 1;
  }

  /**
   * {@link complete} for many claims in one statement, each fenced on its own (on the pool, not in a
   * handler's transaction). Answers which landed, in the order given. Keys go in sorted, as claims
   * do, though the join need not keep that order; two batches can only meet on a row when a key was
   * taken over in between (lapsed leases), and a deadlock PostgreSQL breaks fails the batch: a
   * failed commit is tried again, as always.
   */
  async completeAll(sql: SqlExecutor, commits: readonly Completion[]): Promise<boolean[]> {
    const sorted = [...commits].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const rows = (await sql.query(
      `WITH c AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[], $4::bigint[]) AS c(key, owner, record, ttl_ms)),
       done AS (UPDATE ${this.records} AS r SET state = 1, owner = NULL, record = c.record,
         expires_at = clock_timestamp() + c.ttl_ms * interval '1 millisecond'
       FROM c WHERE r.key = c.key AND r.owner = c.owner AND r.state = 0 RETURNING r.key, c.owner)
       SELECT key, owner FROM done`,
      [sorted.map((c) => c.key), sorted.map((c) => c.owner), sorted.map((c) => c.value), sorted.map((c) => c.ttlMs)],
    )) as { key: string; owner: string }[];
    // An owner holds no newline (a UUID), so owner, newline, key names one pair alone.
    const landed = new Set(rows.map((r) => `${r.owner}\n${r.key}`));
    return commits.map((c) => landed.has(`${c.owner}\n${c.key}`));
  }

  async read(sql: SqlExecutor, key: string): Promise<RecoveryPoint | undefined> {
    const [row] = (await sql.query(
      `SELECT ${POINT_COLUMNS} FROM ${this.phases} WHERE key = $1 AND expires_at > clock_timestamp()`,
      [key],
    )) as PointRow[];
    return row && pointOf(row);
  }

  /**
   * Takes up to `limit` runs of a workflow whose recovery point is live, not finished, untouched for
   * `idleMs`, and whose key no live claim holds (its process died, its client gave up): marks them
   * touched, so pods sweeping at once (`SKIP LOCKED`) and a run that fails again wait `idleMs` more.
   */
  async abandoned(sql: SqlExecutor, idleMs: number, limit: number): Promise<AbandonedRun[]> {
    const rows = (await sql.query(
      `WITH taken AS (SELECT p.key FROM ${this.phases} p
         WHERE p.workflow IS NOT NULL AND p.expires_at > clock_timestamp() AND p.results -> '${FINISHED}' IS NULL
           AND p.updated_at <= clock_timestamp() - $1::bigint * interval '1 millisecond'
           AND NOT EXISTS (SELECT 1 FROM ${this.records} r WHERE r.key = p.key AND r.expires_at > clock_timestamp())
         ORDER BY p.updated_at LIMIT $2 FOR UPDATE OF p SKIP LOCKED)
       UPDATE ${this.phases} p SET updated_at = clock_timestamp() FROM taken WHERE p.key = taken.key
       RETURNING p.key, p.fingerprint, p.results::text AS results, p.texts::text AS texts, p.workflow, p.input::text AS input,
         p.input_text`,
      [idleMs, limit],
    )) as (PointRow & { key: string })[];
    return rows.map((row) => ({ key: row.key, ...pointOf(row) }));
  }

  /**
   * Adds a phase's result, fenced: the UPDATE of the caller's own claim (which also renews its lease)
   * locks its row until the caller's transaction ends, so a retry cannot take the key over between the
   * fence and COMMIT; a claim that is not the caller's any more matches nothing and adds nothing. The
   * exact text is appended to `texts`; `results` and `input` get what `jsonb` can hold of it.
   */
  async advance(sql: SqlExecutor, key: string, owner: string, point: PhaseAdvance): Promise<boolean> {
    const [row] = (await sql.query(
      `WITH mine AS (UPDATE ${this.records} SET expires_at = clock_timestamp() + $1::bigint * interval '1 millisecond'
         WHERE key = $2 AND owner = $3 AND state = 0 RETURNING key),
       point AS (INSERT INTO ${this.phases} AS p (key, fingerprint, results, texts, workflow, input, input_text, updated_at, expires_at)
         SELECT key, $4, jsonb_build_object($5::text, $6::jsonb), jsonb_build_array(jsonb_build_array($7::text, $8::text)),
           $9, $10::jsonb, $11, clock_timestamp(), clock_timestamp() + $12::bigint * interval '1 millisecond' FROM mine
         ON CONFLICT (key) DO UPDATE SET results = p.results || EXCLUDED.results,
           texts = coalesce(p.texts, '[]'::jsonb) || EXCLUDED.texts, workflow = coalesce(p.workflow, EXCLUDED.workflow),
           input = coalesce(p.input, EXCLUDED.input), input_text = coalesce(p.input_text, EXCLUDED.input_text),
           updated_at = EXCLUDED.updated_at, expires_at = EXCLUDED.expires_at
         RETURNING 1)
       SELECT count(*)::int AS advanced FROM point`,
      [
        point.leaseMs,
        key,
        owner,
        point.fingerprint,
        point.phase,
        jsonbSafe(point.result),
        point.phase,
        point.result,
        point.workflow ?? null,
        point.input === undefined ? null : jsonbSafe(point.input),
        point.input ?? null,
        point.ttlMs,
      ],
    )) as { advanced: number }[];
    return row.advanced === 1;
  }

  /** The fenced completion, and the recovery point deleted with it: one statement. */
  async finish(sql: SqlExecutor, key: string, owner: string, value: Buffer, ttlMs: number): Promise<boolean> {
    const [row] = (await sql.query(
      `WITH done AS (UPDATE ${this.records} SET state = 1, owner = NULL, record = $1,
         expires_at = clock_timestamp() + $2::bigint * interval '1 millisecond'
       WHERE key = $3 AND owner = $4 AND state = 0 RETURNING key),
       gone AS (DELETE FROM ${this.phases} p USING done WHERE p.key = done.key)
       SELECT count(*)::int AS completed FROM done`,
      [value, ttlMs, key, owner],
    )) as { completed: number }[];
    return row.completed === 1;
  }
}
