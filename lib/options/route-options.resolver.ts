import { MAX_TTL_MS } from '../idempotency.constants.js';
import { CONFIG_ERRORS } from '../idempotency.messages.js';
import type { IdempotentOptions } from '../interfaces/idempotent-options.interface.js';
import type { ResolvedIdempotencyOptions, ResolvedRouteOptions } from '../interfaces/resolved-options.interface.js';
import { CANONICAL_TAG, functionTag, RAW_TAG } from '../utils/fingerprint-tag.util.js';
import { fail, fingerprintMode, identityOption, integerIn, missingHeaderPolicy, refuseUnknownKeys } from './option.validators.js';

const ROUTE_KEYS = ['ttlMs', 'identity', 'missingHeader', 'transactional', 'fingerprint'] as const;

/** Validates `@Idempotent()` options against the module's; `where` names the handler in errors. */
export function resolveRouteOptions(
  where: string,
  id: string,
  route: IdempotentOptions,
  module: ResolvedIdempotencyOptions,
): ResolvedRouteOptions {
  if (route === null || typeof route !== 'object') fail(where, CONFIG_ERRORS.notAnObject);
  refuseUnknownKeys(where, route, ROUTE_KEYS, undefined);
  const transactional = route.transactional ?? false;
  if (typeof transactional !== 'boolean') fail(where, CONFIG_ERRORS.transactional);
  if (transactional && !module.transactions) fail(where, CONFIG_ERRORS.noTransactions);
  if (transactional && typeof module.store.completeIn !== 'function') fail(where, CONFIG_ERRORS.transactionalStore);
  const fingerprint = fingerprintMode(where, route.fingerprint, module.fingerprint);
  return {
    id,
    ttlMs: integerIn(where, 'ttlMs', route.ttlMs, module.ttlMs, 1, MAX_TTL_MS),
    missingHeader: missingHeaderPolicy(where, route.missingHeader, module.missingHeader),
    fingerprint,
    fingerprintTag:
      typeof fingerprint === 'function' ? functionTag(fingerprint) : fingerprint === 'raw' ? RAW_TAG : CANONICAL_TAG,
    identity: 'identity' in route ? identityOption(where, route.identity) : module.identity,
    transactional,
    leaseMs: transactional ? module.transactionTimeoutMs : module.leaseMs,
  };
}
