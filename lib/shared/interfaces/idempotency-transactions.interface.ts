/**
 * Runs SQL on the connection of the transaction {@link IdempotencyTransactions.run} opened, in the
 * database's own dialect: `PostgresStore` writes `$1`, `$2`, … (each used once, in order, so a driver
 * that wants `?` can take `text.replace(/\$\d+/g, '?')` with the same values); `MySqlStore` writes `?`.
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

/**
 * The part of `TransactionHost` (`@nestjs-cls/transactional`) used here, so this package needs
 * neither nestjs-cls nor the adapter installed: it is handed the instance the application already has.
 */
export interface TransactionHostLike<Tx> {
  /** The transaction of the current CLS context (the adapter's client, entity manager or Kysely transaction). */
  readonly tx: Tx;
  /** Runs `fn` in a transaction, joining the one already active (the default propagation, `REQUIRED`). */
  withTransaction<R>(fn: () => Promise<R>): Promise<R>;
}

/**
 * Runs one statement on the adapter's transaction object and returns its rows, or a result holding
 * them as `rows`. The guide docs/guides/exactly-once.md shows Kysely, Knex, Drizzle and MikroORM.
 */
export type TransactionQuery<Tx> = (tx: Tx, text: string, values: unknown[]) => Promise<unknown>;
