import type { ClaimOutcome, IdempotencyClaim, IdempotencyRecord } from '../../lib/stores/index.js';
import type { IdempotencyStore } from '../../lib/index.js';

/** A store whose answers a test sets, logging every call: for unit tests of what the service sends. */
export class ScriptedStore implements IdempotencyStore {
  readonly calls: unknown[][] = [];
  claimAnswer: () => Promise<ClaimOutcome> = async () => ({ state: 'claimed' });
  commitAnswer: () => Promise<boolean> = async () => true;
  releaseAnswer: () => Promise<boolean> = async () => true;
  renewAnswer: () => Promise<boolean> = async () => true;
  closed = 0;

  claim(key: string, claim: IdempotencyClaim): Promise<ClaimOutcome> {
    this.calls.push(['claim', key, claim]);
    return this.claimAnswer();
  }
  commit(key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean> {
    this.calls.push(['commit', key, owner, record, ttlMs]);
    return this.commitAnswer();
  }
  release(key: string, owner: string): Promise<boolean> {
    this.calls.push(['release', key, owner]);
    return this.releaseAnswer();
  }
  renew(key: string, owner: string, leaseMs: number): Promise<boolean> {
    this.calls.push(['renew', key, owner, leaseMs]);
    return this.renewAnswer();
  }
  async close(): Promise<void> {
    this.closed++;
  }
}
