import { FAILURES } from '../idempotency.messages.js';
import type { PostgresPoolLike } from './postgres-store.options.js';
import { CLAIM_SUFFIX, derivedName, type PostgresNames } from './postgres.schema.js';

/** The columns (and types, as `format_type` names them) the store reads and writes. */
const POSTGRES_COLUMNS: Readonly<Record<string, string>> = {
  key: 'text',
  fingerprint: 'text',
  state: 'smallint',
  owner: 'text',
  expires_at: 'timestamp with time zone',
  record: 'bytea',
};

/**
 * Refuses a table this release cannot work with (made by hand or by an older migration): a wrong
 * or missing column, no primary key on `key`, no claim function. Without it, such a table passed
 * the start and answered 503 to every request, or stored a first response and 503 to every retry.
 */
export async function verifyPostgresTable(pool: PostgresPoolLike, names: PostgresNames, timeoutMs: number): Promise<void> {
  const { schema, table } = names;
  const claimFunction = `"${schema}"."${derivedName(table, CLAIM_SUFFIX)}"`;
  const { rows } = await pool.query({
    text: `SELECT to_regclass($1) IS NOT NULL AS found,
       (SELECT coalesce(json_object_agg(a.attname, format_type(a.atttypid, a.atttypmod)), '{}')
          FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
       EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
          WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indnatts = 1 AND a.attname = 'key') AS keyed,
       to_regprocedure($2) IS NOT NULL AS claims`,
    values: [`"${schema}"."${table}"`, `${claimFunction}(text, text, text, integer, integer)`],
    query_timeout: timeoutMs,
  });
  const [found] = rows as { found: boolean; columns: Record<string, string>; keyed: boolean; claims: boolean }[];
  const problems: string[] = [];
  if (!found.found) problems.push(FAILURES.noTable);
  else {
    for (const [column, type] of Object.entries(POSTGRES_COLUMNS)) {
      const got = found.columns[column];
      if (got !== type) problems.push(FAILURES.column(column, type, got));
    }
    if (!found.keyed) problems.push(FAILURES.noPrimaryKey);
  }
  if (!found.claims) problems.push(FAILURES.noClaimFunction(claimFunction));
  if (problems.length) throw new Error(FAILURES.schemaMismatch('PostgresStore', `"${schema}"."${table}"`, problems));
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
