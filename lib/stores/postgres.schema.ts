/** Where the PostgreSQL store's objects live; both are checked identifiers, quoted in the SQL. */
export interface PostgresNames {
  readonly schema: string;
  readonly table: string;
}

/**
 * The DDL of `PostgresStore`: a LOGGED table (a failover must not forget keys), an index for the
 * sweep, and the claim function. `expires_at` is the end of the lease while the handler runs and the
 * end of the record once it is stored: one column, so one index serves the sweep of both.
 *
 * The claim is one call, race-free under READ COMMITTED: an insert that takes over an expired row in
 * place (the row lock makes a second claimant re-check the new version), else a read of the live row
 * in a new snapshot; when that row vanished in between (released, swept), it tries again. A single
 * `INSERT … ON CONFLICT DO NOTHING` followed by a read in the same statement would see no row when the
 * conflicting insert commits while it waits.
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
CREATE INDEX IF NOT EXISTS "${table}_expires_at" ON ${t} (expires_at);
CREATE OR REPLACE FUNCTION "${schema}"."${table}_claim"(p_key text, p_owner text, p_fingerprint text, p_lease_ms integer)
RETURNS TABLE (claimed boolean, state smallint, fingerprint text, record bytea)
LANGUAGE plpgsql AS $claim$
#variable_conflict use_column
DECLARE
  held ${t}%ROWTYPE;
BEGIN
  FOR attempt IN 1..10 LOOP
    INSERT INTO ${t} AS r (key, fingerprint, state, owner, expires_at, record)
    VALUES (p_key, p_fingerprint, 0, p_owner, clock_timestamp() + p_lease_ms * interval '1 millisecond', NULL)
    ON CONFLICT (key) DO UPDATE
      SET fingerprint = EXCLUDED.fingerprint, state = 0, owner = EXCLUDED.owner,
          expires_at = EXCLUDED.expires_at, record = NULL
      WHERE r.expires_at <= clock_timestamp();
    IF FOUND THEN
      RETURN QUERY SELECT true, NULL::smallint, NULL::text, NULL::bytea;
      RETURN;
    END IF;
    SELECT * INTO held FROM ${t} r WHERE r.key = p_key AND r.expires_at > clock_timestamp();
    IF FOUND THEN
      RETURN QUERY SELECT false, held.state, held.fingerprint, held.record;
      RETURN;
    END IF;
  END LOOP;
  RAISE EXCEPTION 'idempotency claim did not settle after 10 attempts';
END
$claim$;
`;
}
