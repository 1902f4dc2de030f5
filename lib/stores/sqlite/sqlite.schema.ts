/**
 * The DDL of `SqliteStore`: the seed's table, the key as primary key (the race guard), times in
 * integer ms from the store's clock. `expires_at` is the end of the lease while the handler runs and
 * the end of the record once it is stored.
 */
export function sqliteSchemaSql(table: string): string {
  return `CREATE TABLE IF NOT EXISTS "${table}" (
  key TEXT PRIMARY KEY,
  fingerprint TEXT NOT NULL,
  state INTEGER NOT NULL,
  owner TEXT,
  expires_at INTEGER NOT NULL,
  record BLOB
);
CREATE INDEX IF NOT EXISTS "${table}_expires_at" ON "${table}" (expires_at);
`;
}
