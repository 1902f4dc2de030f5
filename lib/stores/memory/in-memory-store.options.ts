/** Options of {@link InMemoryStore}. */
export interface InMemoryStoreOptions {
  /** Most entries held at once; an insert at the bound evicts one (see docs/guides/stores.md). Default 10 000. */
  maxEntries?: number;
  /**
   * Capacity reserved per key prefix, e.g. `{ 'idem:': 8000, 'rl:': 2000 }`. An insert never evicts an entry
   * of a prefix that holds no more than its quota, unless the inserted key has that same prefix.
   * The quotas may add up to `maxEntries` at most.
   */
  prefixQuotas?: Readonly<Record<string, number>>;
  /** Clock in epoch ms; tests inject one. Default `Date.now`. */
  now?: () => number;
}

/** Options of the in-memory store's `set()` and `setIfAbsent()`. */
export interface CacheSetOptions {
  /** Lifetime in ms; without it the entry lives until evicted or deleted. */
  ttlMs?: number;
  /** A guaranteed entry is evicted only once no plain entry is left to take. Default `false`. */
  guaranteed?: boolean;
}
