/**
 * Runs SQL on the connection of the transaction {@link IdempotencyTransactions.run} opened.
 * Placeholders are `$1`, `$2`, … and each is used once, in order, so a driver that wants `?`
 * can take `text.replace(/\$\d+/g, '?')` with the same values.
 */
export interface SqlExecutor {
  /** The rows the statement returned. */
  query(text: string, values: unknown[]): Promise<unknown[]>;
}

/**
 * The port through which a `transactional: true` route runs its handler in one database transaction:
 * the handler's own writes and the completion of its idempotency record commit together or not at all.
 * `clsTransactions(txHost)` implements it for `@nestjs-cls/transactional`.
 */
export interface IdempotencyTransactions {
  /** Runs `work` in one database transaction; commits if and only if `work` resolves. */
  run<T>(work: (sql: SqlExecutor) => Promise<T>): Promise<T>;
}
