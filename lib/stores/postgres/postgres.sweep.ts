import { SWEEP_BATCH, SWEEP_BATCHES } from '../shared/sql-store.options.js';

/**
 * Deletes the expired rows of `table` in batches, at most {@link SWEEP_BATCHES} of them per sweep;
 * `FOR UPDATE SKIP LOCKED` lets pods sweep at once without waiting for each other. Answers how many.
 */
export async function sweepExpired(
  query: (text: string) => Promise<{ rowCount: number | null }>,
  table: string,
): Promise<number> {
  let deleted = 0;
  for (let batch = 0; batch < SWEEP_BATCHES; batch++) {
    const result = await query(
      `DELETE FROM ${table} WHERE key IN (
       SELECT key FROM ${table} WHERE expires_at < clock_timestamp()
       ORDER BY expires_at LIMIT ${SWEEP_BATCH} FOR UPDATE SKIP LOCKED)`,
    );
    deleted += result.rowCount ?? 0;
    if ((result.rowCount ?? 0) < SWEEP_BATCH) break;
  }
  return deleted;
}
