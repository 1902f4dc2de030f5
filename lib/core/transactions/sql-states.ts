/**
 * SQLSTATEs of a COMMIT that PostgreSQL refused and rolled back (a SERIALIZABLE transaction's
 * serialization failure, a deadlock): the outcome is known, so the key can be freed.
 */
export const ROLLED_BACK: ReadonlySet<string> = new Set(['40001', '40P01']);
/** "current transaction is aborted": the handler swallowed an SQL error without a savepoint. */
export const ABORTED = '25P02';

/** The SQLSTATE of a driver's error: node-postgres carries it as `code`; TypeORM wraps it in `driverError`. */
export function sqlState(err: unknown): string {
  const e = err as { code?: unknown; driverError?: { code?: unknown } } | null | undefined;
  const code = e?.code ?? e?.driverError?.code;
  return typeof code === 'string' ? code : '';
}
