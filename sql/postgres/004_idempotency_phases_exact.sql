-- nestjs-idempotency PostgresStore schema, version 004: each phase's result and a workflow's input as the exact JSON
-- text the run made (jsonb refuses a NUL or a lone surrogate, reorders keys and forgets the phases' order). Apply it
-- after 002; only routes with atomicPhases: true need it. Another table or schema name: store.schemaSql() prints 001 to 004.
ALTER TABLE "public"."idempotency_records_phases" ADD COLUMN IF NOT EXISTS texts jsonb;
ALTER TABLE "public"."idempotency_records_phases" ADD COLUMN IF NOT EXISTS input_text text;
