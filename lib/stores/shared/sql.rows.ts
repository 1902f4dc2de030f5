import type { HeldEntry } from '../contract/idempotency-store.interface.js';
import { readRecord } from './store-value.codec.js';

/** `state` of a row: a claim whose handler runs (0), or a record (1). */
export const PROCESSING = 0;

/** A live row of the SQL stores, as a claimant or an operator reads it. */
export interface HeldRow {
  state: number;
  fingerprint: string;
  record: Buffer | null;
}

/** What a live row holds. */
export function held(row: HeldRow): HeldEntry {
  return row.state === PROCESSING ? { state: 'in-flight', fingerprint: row.fingerprint } : readRecord(row.record!);
}
