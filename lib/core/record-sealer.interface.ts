import type { IdempotencyRecord } from '../stores/contract/idempotency-store.interface.js';
import type { StoredResponse } from '../shared/interfaces/stored-response.interface.js';

/**
 * How a response becomes the record a store keeps, and back: the core's port to encryption
 * (`ops/encryption/response.sealer.ts` implements it, provided as `RECORD_SEALER`), so the core
 * neither knows the cipher nor the stores' byte format.
 */
export interface RecordSealer {
  /** The record to store for `response` under `storeKey`: sealed, or as it is without `encryption`. */
  record(storeKey: string, fingerprint: string, response: StoredResponse): IdempotencyRecord;
  /** The response of a stored record; throws `UnsealableRecord` for a sealed one it cannot open. */
  response(storeKey: string, record: IdempotencyRecord): StoredResponse;
}
