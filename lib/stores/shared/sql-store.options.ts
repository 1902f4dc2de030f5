/** Options both SQL stores share. */
export interface SqlStoreOptions {
  /** The table's name. Default `'idempotency_records'`. Letters, digits and `_`, at most 63 characters. */
  tableName?: string;
  /**
   * Create the table (and what goes with it) if missing when the module starts. Default `true`;
   * `false` for teams that run migrations themselves: put the store's `schemaSql()` in one.
   */
  createSchema?: boolean;
  /**
   * How often each process deletes expired rows, in ms, with jitter; `0` turns the sweep off (expired
   * rows then stay until their key is claimed again). Default `60_000`.
   */
  sweepIntervalMs?: number;
}

/** Default of {@link SqlStoreOptions.tableName}. */
export const DEFAULT_TABLE_NAME = 'idempotency_records';
/** Default of {@link SqlStoreOptions.sweepIntervalMs}. */
export const DEFAULT_SWEEP_INTERVAL_MS = 60_000;
/** Rows one sweep statement deletes at most; a sweep runs up to {@link SWEEP_BATCHES} of them. */
export const SWEEP_BATCH = 1000;
export const SWEEP_BATCHES = 10;
