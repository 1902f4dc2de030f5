import { FAILURES } from '../../shared/messages/operator.messages.js';
import type { PostgresPoolLike } from './postgres-store.options.js';
import { EXACT_COLUMNS, PHASES_COLUMNS, PHASES_SUFFIX, phasesExactSql, phasesSchemaSql } from './postgres.phases-schema.js';
import { CLAIM_SUFFIX, claimReadsFirstSql, derivedName, postgresSchemaSql, type PostgresNames } from './postgres.schema.js';

/** The columns (and types, as `format_type` names them) the store reads and writes. */
const POSTGRES_COLUMNS: Readonly<Record<string, string>> = {
  key: 'text',
  fingerprint: 'text',
  state: 'smallint',
  owner: 'text',
  expires_at: 'timestamp with time zone',
  record: 'bytea',
};

/** Each column of `expected` that `found` lacks or types otherwise, as a problem. */
function columnProblems(found: Record<string, string>, expected: Readonly<Record<string, string>>, table = ''): string[] {
  return Object.entries(expected)
    .filter(([column, type]) => found[column] !== type)
    .map(([column, type]) => FAILURES.column(`${table}${column}`, type, found[column]));
}

/** What {@link verifyPostgresTable} found besides what it requires. */
export interface PostgresTableFound {
  /** The recovery points' table (migration 002) is there: forget and the sweep delete from it. */
  readonly phases: boolean;
  /**
   * Why `atomicPhases` routes cannot work (the recovery points' table of migration 002, or its
   * columns of migration 004, are missing); `undefined` when they can.
   */
  readonly phasesMissing: string | undefined;
  /** The claim function reads before it writes (migration 003); the 001 version works, but every replay writes. */
  readonly claimReadsFirst: boolean;
}

/**
 * Refuses a table this release cannot work with (made by hand or by an older migration): a wrong
 * or missing column, no primary key on `key`, no claim function. Without it, such a table passed
 * the start and answered 503 to every request, or stored a first response and 503 to every retry.
 * The recovery points' table (migration 002, with 004's columns) may be missing: only `atomicPhases`
 * routes need it, and they answer 503 without it (the health check says why); so may migration 003
 * (the claim function of 001 gives the same answers).
 */
export async function verifyPostgresTable(
  pool: PostgresPoolLike,
  names: PostgresNames,
  timeoutMs: number,
): Promise<PostgresTableFound> {
  const { schema, table } = names;
  const claimFunction = `"${schema}"."${derivedName(table, CLAIM_SUFFIX)}"`;
  const phasesTable = `"${schema}"."${derivedName(table, PHASES_SUFFIX)}"`;
  const { rows } = await pool.query({
    text: `SELECT to_regclass($1) IS NOT NULL AS found,
       (SELECT coalesce(json_object_agg(a.attname, format_type(a.atttypid, a.atttypmod)), '{}')
          FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
       EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
          WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indnatts = 1 AND a.attname = 'key') AS keyed,
       to_regprocedure($2) IS NOT NULL AS claims,
       (SELECT strpos(p.prosrc, 'SELECT r.state') < strpos(p.prosrc, 'INSERT INTO')
          FROM pg_proc p WHERE p.oid = to_regprocedure($2)) AS reads_first,
       (SELECT json_object_agg(a.attname, format_type(a.atttypid, a.atttypmod))
          FROM pg_attribute a WHERE a.attrelid = to_regclass($3) AND a.attnum > 0 AND NOT a.attisdropped) AS phases`,
    values: [`"${schema}"."${table}"`, `${claimFunction}(text, text, text, integer, integer)`, phasesTable],
    query_timeout: timeoutMs,
  });
  const [found] = rows as {
    found: boolean;
    columns: Record<string, string>;
    keyed: boolean;
    claims: boolean;
    reads_first: boolean | null;
    phases: Record<string, string> | null;
  }[];
  const problems: string[] = [];
  if (!found.found) problems.push(FAILURES.noTable);
  else {
    problems.push(...columnProblems(found.columns, POSTGRES_COLUMNS));
    if (!found.keyed) problems.push(FAILURES.noPrimaryKey);
  }
  if (!found.claims) problems.push(FAILURES.noClaimFunction(claimFunction));
  if (found.phases) problems.push(...columnProblems(found.phases, PHASES_COLUMNS, `${phasesTable}.`));
  if (problems.length) throw new Error(FAILURES.schemaMismatch('PostgresStore', `"${schema}"."${table}"`, problems));
  const phasesMissing = found.phases
    ? columnProblems(found.phases, EXACT_COLUMNS, `${phasesTable}.`).join('; ') || undefined
    : FAILURES.noPhasesTable(phasesTable);
  return { phases: found.phases !== null, phasesMissing, claimReadsFirst: found.reads_first === true };
}

/** Migrations 001 to 004 for `names`, in order: what `createSchema` runs, and the shipped files joined. */
export function postgresMigrationsSql(names: PostgresNames): string {
  return postgresSchemaSql(names) + phasesSchemaSql(names) + claimReadsFirstSql(names) + phasesExactSql(names);
}

/** Two pods starting at once may both create the schema: a lost race is retried once the winner is done. */
export async function createPostgresSchema(pool: PostgresPoolLike, sql: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await pool.query({ text: sql });
      return;
    } catch (err) {
      if (attempt >= 3) throw new Error(FAILURES.postgresSchema((err as Error).message), { cause: err });
      await new Promise((r) => setTimeout(r, 50 * attempt));
    }
  }
}
