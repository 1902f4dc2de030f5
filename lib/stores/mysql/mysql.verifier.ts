import { FAILURES } from '../../shared/messages/operator.messages.js';
import type { MySqlPoolLike } from './mysql-store.options.js';
import { claimProcedure, completeProcedure, mysqlSchemaStatements } from './mysql.schema.js';

/** "Table already exists": CREATE TABLE IF NOT EXISTS can still say so when two pods create it at once. */
const ER_TABLE_EXISTS = 1050;

/** Runs one statement of the check and returns its rows. */
export type MySqlRead = (sql: string, values: unknown[]) => Promise<Record<string, unknown>[]>;

/**
 * The columns and their types (`DATA_TYPE`, which MySQL 8 and MariaDB spell alike; display widths
 * differ). Binary keys and owners are the point: a `varchar` with a case-insensitive collation
 * would make two keys one.
 */
const MYSQL_COLUMNS: Readonly<Record<string, string>> = {
  key: 'varbinary',
  fingerprint: 'varbinary',
  state: 'tinyint',
  owner: 'varbinary',
  expires_at: 'datetime',
  record: 'longblob',
};

/** Room a record needs beside its body: status, headers, fingerprint, the statement around it. */
export const RECORD_OVERHEAD_BYTES = 1 << 20;

/**
 * Refuses a table this release cannot work with (made by hand, or by a migration of another
 * store): a wrong or missing column, no primary key on `key` alone, a missing procedure; and a
 * server whose `max_allowed_packet` cannot carry a record of `maxResponseBytes` (a commit would
 * fail after the handler ran, every time).
 */
export async function verifyMySqlTable(read: MySqlRead, table: string, maxResponseBytes: number | undefined): Promise<void> {
  const columns = (await read(
    `SELECT COLUMN_NAME AS name, DATA_TYPE AS type, COLUMN_KEY AS \`key\` FROM information_schema.COLUMNS
     WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`,
    [table],
  )) as { name: string; type: string; key: string }[];
  const problems: string[] = [];
  if (columns.length === 0) problems.push(FAILURES.noTable);
  else {
    const found = new Map(columns.map((c) => [c.name, c]));
    for (const [name, type] of Object.entries(MYSQL_COLUMNS)) {
      const got = found.get(name)?.type.toLowerCase();
      if (got !== type) problems.push(FAILURES.column(name, type, got));
    }
    if (found.get('key')?.key !== 'PRI' || columns.some((c) => c.name !== 'key' && c.key === 'PRI')) {
      problems.push(FAILURES.noPrimaryKey);
    }
  }
  const procedures = new Set(
    (
      (await read(
        `SELECT ROUTINE_NAME AS name FROM information_schema.ROUTINES
         WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE' AND ROUTINE_NAME IN (?, ?)`,
        [claimProcedure(table), completeProcedure(table)],
      )) as { name: string }[]
    ).map((r) => r.name),
  );
  for (const name of [claimProcedure(table), completeProcedure(table)]) {
    if (!procedures.has(name)) problems.push(FAILURES.noProcedure(name));
  }
  if (problems.length) throw new Error(FAILURES.schemaMismatch('MySqlStore', `\`${table}\``, problems));
  if (maxResponseBytes === undefined) return;
  const [{ packet }] = (await read('SELECT @@max_allowed_packet AS packet', [])) as { packet: number }[];
  const needed = maxResponseBytes + RECORD_OVERHEAD_BYTES;
  if (Number(packet) < needed) throw new Error(FAILURES.mysqlPacket(Number(packet), needed));
}

/**
 * At connect: creates the schema (unless `create` is off; `IF NOT EXISTS` throughout, so pods
 * starting together each run it and an existing schema is left as it is), then checks it.
 */
export async function openMySqlSchema(
  pool: MySqlPoolLike,
  table: string,
  options: { create: boolean; timeoutMs: number; maxResponseBytes: number | undefined },
): Promise<void> {
  if (options.create) {
    for (const sql of mysqlSchemaStatements(table)) {
      try {
        // DDL may wait for a metadata lock a moment: a bound well past a statement's.
        await pool.query({ sql, timeout: options.timeoutMs * 10 });
      } catch (err) {
        if ((err as { errno?: number }).errno === ER_TABLE_EXISTS) continue;
        throw new Error(FAILURES.mysqlSchema((err as Error).message), { cause: err });
      }
    }
  }
  const read: MySqlRead = async (sql, values) =>
    (await pool.execute({ sql, timeout: options.timeoutMs }, values))[0] as Record<string, unknown>[];
  await verifyMySqlTable(read, table, options.maxResponseBytes);
}
