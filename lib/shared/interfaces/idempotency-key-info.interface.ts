/**
 * Where a key lives: the identity scope it was claimed under, if the route has one; and, for a key
 * that is not an HTTP route's, whose records it is in (at most one of `consumer`, `messageHandler`, `mutation`).
 */
export interface IdempotencyKeyTarget {
  /**
   * The scope as the route's identity resolver (a message handler's `scope`, the inbox's `scope`)
   * returns it, e.g. the account id. Leave it out where there is none. HTTP keys are not per route:
   * one key under one scope serves every route.
   */
  readonly scope?: string;
  /** An `IdempotencyInbox.run()` key: the `consumer` it was run for. */
  readonly consumer?: string;
  /** An `@Idempotent()` message handler's key: the handler as `Class.method`. */
  readonly messageHandler?: string;
  /** An `@Idempotent()` GraphQL mutation's key: the resolver method as `Class.method`. */
  readonly mutation?: string;
}

/** Options of `IdempotencyAdmin.inspect()`. */
export interface IdempotencyInspectOptions extends IdempotencyKeyTarget {
  /** Include the stored body (it may hold personal or card data). Default `false`. */
  readonly body?: boolean;
}

/** What `IdempotencyAdmin.inspect()` tells of a key. */
export interface IdempotencyKeyInfo {
  /** `in-flight`: claimed, its handler running; `completed`: a stored response; `unreadable`: written by a newer release. */
  readonly state: 'in-flight' | 'completed' | 'unreadable';
  /** When the claim's lease or the record's ttl ends (epoch ms, by the store's clock). */
  readonly expiresAt: number;
  /** The request fingerprint (a hash) the key is bound to; `undefined` when unreadable. */
  readonly fingerprint: string | undefined;
  /** The stored response's status; `undefined` unless completed. */
  readonly status: number | undefined;
  /** The stored response's headers; `undefined` unless completed. */
  readonly headers: Readonly<Record<string, string | readonly string[]>> | undefined;
  /** The stored body, only when asked for with `{ body: true }`. */
  readonly body: Buffer | undefined;
  /** Why an unreadable record cannot be read. */
  readonly reason: string | undefined;
}
