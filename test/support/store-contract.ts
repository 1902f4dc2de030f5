import { describe, it } from '@jest/globals';
import type { IdempotencyStore } from '../../lib/index.js';
import { storeContract as shippedContract, type StoreContractOptions } from '../../lib/testing/index.js';

export { sampleRecord } from '../../lib/testing/index.js';

/**
 * The shipped contract suite (`nestjs-idempotency/testing`), run under jest for this package's stores:
 * every store here implements every optional method, so none is declared missing.
 */
export function storeContract(
  name: string,
  open: () => Promise<IdempotencyStore>,
  close: (store: IdempotencyStore) => Promise<void> = async () => {},
  plant?: StoreContractOptions['plant'],
  another?: StoreContractOptions['another'],
): void {
  shippedContract({ describe, it }, open, { name, close: (store) => close(store), plant, another });
}
