import { randomUUID } from 'node:crypto';
import type { ActiveClaim } from '../shared/interfaces/active-claim.interface.js';

/** What a claim takes from the route (or workflow) it runs: a resolved route has all three. */
export interface ClaimTerms {
  /** The handler (`Controller.method`) or workflow, for log lines. */
  readonly id: string;
  readonly ttlMs: number;
  readonly leaseMs: number;
}

/**
 * A claim about to be sent to the store, with a fresh owner token: the one place an `ActiveClaim` is
 * made, for a request, a message, a mutation and the completer alike.
 */
export function openClaim(
  key: string,
  storeKey: string,
  fingerprint: string,
  terms: ClaimTerms,
  method?: string,
  onSettled?: (storeKey: string) => void,
): ActiveClaim {
  return {
    key,
    storeKey,
    owner: randomUUID(),
    fingerprint,
    ttlMs: terms.ttlMs,
    route: terms.id,
    leaseMs: terms.leaseMs,
    claimedAt: Date.now(),
    method,
    storeMs: 0,
    onSettled,
  };
}
