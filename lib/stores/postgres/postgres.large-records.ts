import type { SqlExecutor } from '../../shared/interfaces/idempotency-transactions.interface.js';
import type { PostgresPoolLike } from './postgres-store.options.js';
import { INLINE_RECORD_BYTES } from './postgres.schema.js';

/** A record larger than this is committed on a connection of its own with a statement timeout scaled to its size. */
export const LARGE_RECORD_BYTES = 1 << 20;
/** The slowest transfer a large record's statement is allowed, in bytes per ms (8 MB/s). */
const BYTES_PER_MS = 8_000;

/** The parts of a node-postgres pool client a large commit uses. */
interface PoolClientLike {
  query(config: { text: string; values?: unknown[]; query_timeout?: number }): Promise<{ rows: Record<string, unknown>[] }>;
  release(err?: Error | boolean): void;
}

/**
 * Runs `work` on a connection of its own whose statement timeout is `timeoutMs` plus the time a
 * transfer of `bytes` may take; the client waits `slackMs` longer than the server, as everywhere.
 */
export async function onSizedConnection<T>(
  pool: PostgresPoolLike,
  timeoutMs: number,
  slackMs: number,
  bytes: number,
  work: (sql: SqlExecutor) => Promise<T>,
): Promise<T> {
  const sized = timeoutMs + Math.ceil(bytes / BYTES_PER_MS);
  const client = (await pool.connect!()) as PoolClientLike;
  try {
    await client.query({ text: `SET statement_timeout = ${sized}` });
    const done = await work({
      query: async (text, values) => (await client.query({ text, values, query_timeout: sized + slackMs })).rows,
    });
    await client.query({ text: 'RESET statement_timeout' });
    client.release();
    return done;
  } catch (err) {
    // A connection whose timeout may still be the long one never goes back to the pool.
    client.release(err as Error);
    throw err;
  }
}

/**
 * A large record, read in parts of its row version `version` from `table` (quoted);
 * `undefined` when the row changed in between.
 */
export async function readRecordParts(
  sql: SqlExecutor,
  table: string,
  key: string,
  version: string,
  size: number,
): Promise<Buffer | undefined> {
  const parts: Buffer[] = [];
  for (let from = 0; from < size; from += INLINE_RECORD_BYTES) {
    const [row] = (await sql.query(
      `SELECT substring(record FROM $2 FOR $3) AS part FROM ${table}
       WHERE key = $1 AND xmin::text = $4 AND expires_at > clock_timestamp()`,
      [key, from + 1, INLINE_RECORD_BYTES, version],
    )) as { part: Buffer }[];
    if (!row) return undefined;
    parts.push(row.part);
  }
  return Buffer.concat(parts, size);
}
