-- nestjs-idempotency PostgresStore schema, version 002: the recovery points of atomicPhases routes, as createSchema
-- runs it with the defaults (schema 'public', tableName 'idempotency_records'). Apply it after 001; only routes with
-- atomicPhases: true need it. Another table or schema name: store.schemaSql() prints 001 and 002 for your options.
CREATE TABLE IF NOT EXISTS "public"."idempotency_records_phases" (
  key text PRIMARY KEY,
  fingerprint text NOT NULL,
  results jsonb NOT NULL,
  workflow text,
  input jsonb,
  updated_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS "idempotency_records_phases_expires_at" ON "public"."idempotency_records_phases" (expires_at);
