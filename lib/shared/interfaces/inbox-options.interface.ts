/** Options of one {@link IdempotencyInbox.run} call. */
export interface InboxRunOptions {
  /**
   * The consumer (`OrdersConsumer.created`), in events and log lines. Each consumer keeps its own
   * records: a key another consumer (or an HTTP client) used is another message here.
   */
  readonly consumer: string;
  /** Where the key is unique (a tenant, a source system): keys of two scopes never meet. Default: one scope for all. */
  readonly scope?: string;
  /**
   * The message's content (any JSON value). Given, a second message with the key and other content
   * is refused (`key-reused`) instead of being skipped as a duplicate. Default: only the key counts.
   */
  readonly payload?: unknown;
  /** How long the result is remembered, in ms. Default: the module's `ttlMs`. */
  readonly ttlMs?: number;
  /**
   * Runs the work in a transaction of the module's `transactions` port and commits the inbox record in
   * it (`PostgresStore` only): the message is processed once with respect to the database, even when
   * the broker redelivers after the commit. The work gets the transaction's executor. Default `false`.
   */
  readonly transactional?: boolean;
}

/** What {@link IdempotencyInbox.run} came to. */
export interface InboxResult<T> {
  /**
   * The work's result; for a duplicate, the first run's, read back as JSON: a `Date` comes back as its
   * string, a class instance as a plain object, a `Map` or `Set` as `{}`, a `Buffer` as `{ type, data }`,
   * `NaN` as `null` (the first value of each consumer with such a part is logged once). A result JSON
   * cannot hold (a BigInt, a cycle) or over `maxResponseBytes` makes a duplicate throw
   * `result-unstorable` or `response-too-large`: the work does not run again.
   */
  readonly value: T;
  /** `true` when the work did not run: an earlier message with this key completed it. */
  readonly duplicate: boolean;
}
