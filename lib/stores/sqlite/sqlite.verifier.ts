import { FAILURES } from '../../shared/messages/operator.messages.js';
import type { SqliteDatabaseLike } from './sqlite-store.options.js';

/** The columns (and declared types) the store reads and writes. */
const SQLITE_COLUMNS: Readonly<Record<string, string>> = {
  key: 'TEXT',
  fingerprint: 'TEXT',
  state: 'INTEGER',
  owner: 'TEXT',
  expires_at: 'INTEGER',
  record: 'BLOB',
};

/**
 * Refuses a table this release cannot work with (made by hand or by an older migration): a wrong
 * or missing column, or no primary key on `key` alone.
 */
export function verifySqliteTable(db: SqliteDatabaseLike, table: string): void {
  const columns = db.prepare(`SELECT name, type, pk FROM pragma_table_info(?)`).all(table) as {
    name: string;
    type: string;
    pk: number;
  }[];
  const problems: string[] = [];
  if (columns.length === 0) problems.push(FAILURES.noTable);
  else {
    const found = new Map(columns.map((c) => [c.name, c]));
    for (const [name, type] of Object.entries(SQLITE_COLUMNS)) {
      const got = found.get(name)?.type.toUpperCase();
      if (got !== type) problems.push(FAILURES.column(name, type, got));
    }
    if (found.get('key')?.pk !== 1 || columns.some((c) => c.pk > 1)) problems.push(FAILURES.noPrimaryKey);
  }
  if (problems.length) throw new Error(FAILURES.schemaMismatch('SqliteStore', `"${table}"`, problems));
}
