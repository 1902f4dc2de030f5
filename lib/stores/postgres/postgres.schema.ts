import { createHash } from 'node:crypto';

/** Where the PostgreSQL store's objects live; both are checked identifiers, quoted in the SQL. */
export interface PostgresNames {
  readonly schema: string;
  readonly table: string;
}

/** PostgreSQL's NAMEDATALEN - 1: a longer identifier is cut to this many bytes, silently. */
const MAX_IDENTIFIER = 63;

/**
 * The name of an object derived from the table (`<table>_<suffix>`). PostgreSQL cuts a name past 63
 * bytes without a word, so the index of a 63-character table would be cut back to the table's own
 * name, collide with it, and be skipped by `IF NOT EXISTS`. A name that would not fit is the
 * table's name cut short, 8 hex characters of its hash, then the suffix: distinct for every table.
 */
export function derivedName(table: string, suffix: string): string {
  const name = `${table}_${suffix}`;
  if (name.length <= MAX_IDENTIFIER) return name;
  const hash = createHash('sha256').update(table).digest('hex').slice(0, 8);
  return `${table.slice(0, MAX_IDENTIFIER - suffix.length - 10)}_${hash}_${suffix}`;
}

/**
 * Records up to this size come back inline with the claim decision; a larger one is read in parts of
 * this size afterwards, each a statement of its own, so the statement timeout bounds the decision
 * and each part, never the transfer of a whole large record.
 */
export const INLINE_RECORD_BYTES = 1 << 20;

/** The claim function's name: `_claim2` since it returns the record's size (the first `_claim` stays for older pods). */
export const CLAIM_SUFFIX = 'claim2';

/**
 * The DDL of `PostgresStore` as migration 001 made it: a LOGGED table (a failover must not forget
 * keys), an index for the sweep, and the first claim function (which {@link claimReadsFirstSql},
 * migration 003, replaces). `expires_at` is the end of the lease while the handler runs and the end
 * of the record once it is stored: one column, so one index serves the sweep of both.
 */
export function postgresSchemaSql({ schema, table }: PostgresNames): string {
  const t = `"${schema}"."${table}"`;
  const createSchema = schema === 'public' ? '' : `CREATE SCHEMA IF NOT EXISTS "${schema}";\n`;
  return `${createSchema}CREATE TABLE IF NOT EXISTS ${t} (
  key text PRIMARY KEY,
  fingerprint text NOT NULL,
  state smallint NOT NULL,
  owner text,
  expires_at timestamptz NOT NULL,
  record bytea
);
CREATE INDEX IF NOT EXISTS "${derivedName(table, 'expires_at')}" ON ${t} (expires_at);
${claimFunctionSql({ schema, table }, false)}`;
}

/**
 * Migration 003: the claim function reads the live row before it tries to write. The first version
 * began with the insert, and `ON CONFLICT DO UPDATE` locks the row it conflicts with even when its
 * `WHERE` then declines the update: every replay and every conflict took a transaction id, wrote a
 * row lock to the table and the WAL, and waited for any other replay of the same key to commit
 * (measured: a replay behind another one held open waited until it ended). Same name, signature and
 * answers: pods of either version share the table.
 */
export function claimReadsFirstSql(names: PostgresNames): string {
  return claimFunctionSql(names, true);
}

/**
 * The claim is one call, race-free under READ COMMITTED: an insert that takes over an expired row in
 * place (the row lock makes a second claimant re-check the new version), and a read of the live row
 * in a new snapshot; when the insert meets a row the read did not see, or the read finds none after
 * the insert conflicted (released, swept in between), it tries again. A single `INSERT … ON CONFLICT
 * DO NOTHING` followed by a read in the same statement would see no row when the conflicting insert
 * commits while it waits. It hands back the record only up to `p_inline` bytes, and always its size
 * and the row version (`xmin`) the parts of a larger one are read against. `readsFirst` orders the
 * read before the insert (migration 003).
 */
function claimFunctionSql({ schema, table }: PostgresNames, readsFirst: boolean): string {
  const t = `"${schema}"."${table}"`;
  const insert = `    INSERT INTO ${t} AS r (key, fingerprint, state, owner, expires_at, record)
    VALUES (p_key, p_fingerprint, 0, p_owner, clock_timestamp() + p_lease_ms * interval '1 millisecond', NULL)
    ON CONFLICT (key) DO UPDATE
      SET fingerprint = EXCLUDED.fingerprint, state = 0, owner = EXCLUDED.owner,
          expires_at = EXCLUDED.expires_at, record = NULL
      WHERE r.expires_at <= clock_timestamp();
    IF FOUND THEN
      RETURN QUERY SELECT true, NULL::smallint, NULL::text, NULL::bytea, NULL::integer, NULL::text;
      RETURN;
    END IF;
`;
  const read = `    SELECT r.state, r.fingerprint, octet_length(r.record),
           CASE WHEN octet_length(r.record) <= p_inline THEN r.record END, r.xmin::text
      INTO v_state, v_fingerprint, v_size, v_record, v_version
      FROM ${t} r WHERE r.key = p_key AND r.expires_at > clock_timestamp();
    IF FOUND THEN
      RETURN QUERY SELECT false, v_state, v_fingerprint, v_record, v_size, v_version;
      RETURN;
    END IF;
`;
  return `CREATE OR REPLACE FUNCTION "${schema}"."${derivedName(table, CLAIM_SUFFIX)}"(p_key text, p_owner text, p_fingerprint text, p_lease_ms integer, p_inline integer)
RETURNS TABLE (claimed boolean, state smallint, fingerprint text, record bytea, record_size integer, version text)
LANGUAGE plpgsql AS $claim$
#variable_conflict use_column
DECLARE
  v_state smallint;
  v_fingerprint text;
  v_record bytea;
  v_size integer;
  v_version text;
BEGIN
  FOR attempt IN 1..10 LOOP
${readsFirst ? read + insert : insert + read}  END LOOP;
  RAISE EXCEPTION 'idempotency claim did not settle after 10 attempts';
END
$claim$;
`;
}
