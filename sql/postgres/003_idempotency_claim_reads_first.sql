-- nestjs-idempotency PostgresStore schema, version 003: the claim function reads the live row before it writes, so a
-- replay or a conflict no longer locks the row (nor waits for another replay of its key). Apply it after 001 (and 002);
-- it replaces idempotency_records_claim2 in place. Another table or schema name: store.schemaSql() prints 001 to 003.
CREATE OR REPLACE FUNCTION "public"."idempotency_records_claim2"(p_key text, p_owner text, p_fingerprint text, p_lease_ms integer, p_inline integer)
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
    SELECT r.state, r.fingerprint, octet_length(r.record),
           CASE WHEN octet_length(r.record) <= p_inline THEN r.record END, r.xmin::text
      INTO v_state, v_fingerprint, v_size, v_record, v_version
      FROM "public"."idempotency_records" r WHERE r.key = p_key AND r.expires_at > clock_timestamp();
    IF FOUND THEN
      RETURN QUERY SELECT false, v_state, v_fingerprint, v_record, v_size, v_version;
      RETURN;
    END IF;
    INSERT INTO "public"."idempotency_records" AS r (key, fingerprint, state, owner, expires_at, record)
    VALUES (p_key, p_fingerprint, 0, p_owner, clock_timestamp() + p_lease_ms * interval '1 millisecond', NULL)
    ON CONFLICT (key) DO UPDATE
      SET fingerprint = EXCLUDED.fingerprint, state = 0, owner = EXCLUDED.owner,
          expires_at = EXCLUDED.expires_at, record = NULL
      WHERE r.expires_at <= clock_timestamp();
    IF FOUND THEN
      RETURN QUERY SELECT true, NULL::smallint, NULL::text, NULL::bytea, NULL::integer, NULL::text;
      RETURN;
    END IF;
  END LOOP;
  RAISE EXCEPTION 'idempotency claim did not settle after 10 attempts';
END
$claim$;
