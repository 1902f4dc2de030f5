-- nestjs-idempotency SqliteStore schema, version 001: exactly what createSchema runs with the defaults
-- (tableName 'idempotency_records'). Apply it with your migration tool and set createSchema: false.
-- Another table or schema name: store.schemaSql() prints this DDL for your options.
CREATE TABLE IF NOT EXISTS "idempotency_records" (
  key TEXT PRIMARY KEY,
  fingerprint TEXT NOT NULL,
  state INTEGER NOT NULL,
  owner TEXT,
  expires_at INTEGER NOT NULL,
  record BLOB
);
CREATE INDEX IF NOT EXISTS "idempotency_records_expires_at" ON "idempotency_records" (expires_at);
