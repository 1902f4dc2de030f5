import { FAILURES } from '../../shared/messages/operator.messages.js';
import type {
  IdempotencyTransactions,
  SqlExecutor,
  TransactionHostLike,
  TransactionQuery,
} from '../../shared/interfaces/idempotency-transactions.interface.js';

/** `tx.query(text, values)`: a node-postgres client, a TypeORM `EntityManager`. */
const callQuery: TransactionQuery<unknown> = (tx, text, values) =>
  (tx as { query(text: string, values: unknown[]): Promise<unknown> }).query(text, values);

function rowsOf(result: unknown): unknown[] {
  if (Array.isArray(result)) return result;
  const rows = (result as { rows?: unknown } | null | undefined)?.rows;
  if (Array.isArray(rows)) return rows;
  throw new Error(FAILURES.noRows);
}

/**
 * {@link IdempotencyTransactions} on `@nestjs-cls/transactional`: the handler runs in
 * `txHost.withTransaction()`, so the `@Transactional()` services it calls join the same transaction,
 * and the idempotency record is completed on `txHost.tx`. `query` says how to run SQL on `txHost.tx`
 * when it has no `query(text, values)` of its own.
 */
export function clsTransactions<Tx>(
  txHost: TransactionHostLike<Tx>,
  query: TransactionQuery<Tx> = callQuery,
): IdempotencyTransactions {
  const sql: SqlExecutor = { query: async (text, values) => rowsOf(await query(txHost.tx, text, values)) };
  return { run: (work) => txHost.withTransaction(() => work(sql)) };
}
