import type { IdempotencyStore } from '../stores/contract/idempotency-store.interface.js';

/** The two functions of a test framework the suite needs: jest, vitest and `node:test` all have them. */
export interface ContractFramework {
  describe(name: string, body: () => void): unknown;
  it(name: string, body: () => Promise<void>): unknown;
}

/** The store methods the module calls only when present; the suite tests each one the store has. */
export type OptionalStoreMethod = 'ping' | 'peek' | 'forget' | 'renewAll';

/** Options of {@link storeContract}. */
export interface StoreContractOptions {
  /** Shown in the suite's name: `store contract: <name>`. Default `'store'`. */
  name?: string;
  /**
   * Called by the suite's last test, e.g. `(store) => store.close()`: a store with `listen` has opened
   * its listener's connection by then.
   */
  close?: (store: IdempotencyStore) => Promise<void> | void;
  /**
   * Optional methods your store does not implement. Without them, the module works without the
   * health check (`ping`), the admin service (`peek`, `forget`) or batched renewal (`renewAll`). A
   * method neither implemented nor listed here fails the suite: forgetting one is a mistake.
   */
  without?: readonly OptionalStoreMethod[];
  /**
   * Writes `value` under `key` as the store keeps a record, bypassing its codec, to check that a
   * record in a newer format is never replayed nor taken over. Without it, that test is left out.
   */
  plant?: (store: IdempotencyStore, key: string, value: Buffer, ttlMs: number) => Promise<void>;
  /**
   * Opens a second store over the same backend (another connection, as another pod would), to check
   * that a claim is atomic across instances and not only inside one process. It is closed with
   * `close`. Without it, that test is left out: give it for any store shared by several processes.
   */
  another?: () => Promise<IdempotencyStore> | IdempotencyStore;
}

/** Every optional method, in the order the suite checks them. */
export const OPTIONAL_METHODS: readonly OptionalStoreMethod[] = ['ping', 'peek', 'forget', 'renewAll'];
