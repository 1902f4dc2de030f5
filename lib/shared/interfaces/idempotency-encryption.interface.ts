/**
 * The `encryption` option: stored responses sealed with AES-256-GCM. Records sealed with any listed
 * key are read; new ones are sealed with `current`. Rotate by adding a key, making it current, and
 * removing the old one once its records have expired (`ttlMs`).
 */
export interface IdempotencyEncryption {
  /**
   * Keys by id: each 32 bytes (e.g. `Buffer.from(process.env.IDEM_KEY_2026, 'base64')`). An id is
   * stored in clear with each record: 1 to 64 of `A-Z a-z 0-9 . _ -`.
   */
  keys: Readonly<Record<string, Buffer | Uint8Array>>;
  /** The id of the key new records are sealed with. */
  current: string;
  /**
   * Until when (a `Date` or epoch ms) a record that is not sealed is still replayed: the records
   * written before encryption was turned on. Set it to the deploy that turns encryption on plus
   * `ttlMs`; after it, or without it, an unsealed record is unreadable (503, never replayed, never
   * run again), since only someone who writes to the store can have put it there.
   */
  acceptUnsealedUntil?: Date | number;
}

/** The `encryption` option as validated: private copies of the keys. */
export interface ResolvedEncryption {
  readonly keys: ReadonlyMap<string, Buffer>;
  readonly current: string;
  /** Epoch ms; `0` when unsealed records are never read. */
  readonly acceptUnsealedUntil: number;
}
