import type { ActiveClaim } from '../../lib/shared/interfaces/active-claim.interface.js';
import type { ResolvedRouteOptions } from '../../lib/shared/interfaces/resolved-options.interface.js';
import { CANONICAL_TAG, functionTag, RAW_TAG } from '../../lib/shared/utils/fingerprint-tag.util.js';

/** A claim as the protocol hands it out, for tests of what is done with one (commit, renewal). */
export function activeClaim(over: Partial<ActiveClaim> = {}): ActiveClaim {
  const claimedAt = over.claimedAt ?? Date.now();
  return {
    key: 'k',
    storeKey: 'idem:%:k',
    owner: 'me',
    fingerprint: 'fp',
    ttlMs: 500,
    route: 'Pay.create',
    leaseMs: 60_000,
    claimedAt,
    method: 'POST',
    storeMs: 0,
    ...over,
  };
}

/** A route's resolved options as `@Idempotent()` with no options gives them; the tag follows `fingerprint`. */
export function resolvedRoute(over: Partial<ResolvedRouteOptions> = {}): ResolvedRouteOptions {
  const fingerprint = over.fingerprint ?? 'canonical';
  return {
    id: 'Pay.create',
    ttlMs: 1000,
    missingHeader: 'reject',
    fingerprint,
    fingerprintTag:
      typeof fingerprint === 'function' ? functionTag(fingerprint) : fingerprint === 'raw' ? RAW_TAG : CANONICAL_TAG,
    identity: undefined,
    settling: 'commit',
    waitMs: 0,
    leaseMs: 60_000,
    ...over,
  };
}
