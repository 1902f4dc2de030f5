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
}

/** The `encryption` option as validated: private copies of the keys. */
export interface ResolvedEncryption {
  readonly keys: ReadonlyMap<string, Buffer>;
  readonly current: string;
}
