import type { ActiveClaim } from '../../lib/index.js';

/** A claim as the protocol hands it out, for tests of what is done with one (commit, renewal). */
export function activeClaim(over: Partial<ActiveClaim> = {}): ActiveClaim {
  return {
    key: 'k',
    cacheKey: 'idem:%:k',
    owner: 'me',
    fingerprint: 'fp',
    ttlMs: 500,
    route: 'Pay.create',
    leaseMs: 60_000,
    claimedAt: Date.now(),
    ...over,
  };
}
