import { InMemoryStore } from '../../lib/index.js';
import { GUARANTEED } from '../../lib/stores/memory/bounded-lru.js';
import { storeContract } from '../support/store-contract.js';

/** The entry kind InMemoryStore gives records (in-memory.cache.ts). */
const RECORD_KIND = 2;

storeContract(
  'InMemoryStore',
  async () => new InMemoryStore(),
  undefined,
  async (store, key, value, ttlMs) => {
    // As commit() keeps a record: its bytes as a one-byte string in a guaranteed entry.
    const insert = (store as unknown as { insert: (...args: unknown[]) => unknown }).insert.bind(store);
    insert(key, value.toString('latin1'), RECORD_KIND, Date.now() + ttlMs, GUARANTEED);
  },
);
