import { DEFAULT_MAX_ATTEMPTS, MAX_TTL_MS } from '../idempotency.constants.js';
import { CONFIG_ERRORS } from '../idempotency.messages.js';
import type { IdempotentOptions } from '../interfaces/idempotent-options.interface.js';
import type { ResolvedIdempotencyOptions, ResolvedRouteOptions } from '../interfaces/resolved-options.interface.js';
import { CANONICAL_TAG, functionTag, RAW_TAG } from '../utils/fingerprint-tag.util.js';
import { fail, fingerprintMode, identityOption, integerIn, missingHeaderPolicy, refuseUnknownKeys } from './option.validators.js';

const ROUTE_KEYS = [
  'ttlMs',
  'identity',
  'missingHeader',
  'transactional',
  'fingerprint',
  'keyFrom',
  'missingKey',
  'ack',
  'maxAttempts',
] as const;
/** What reads an HTTP request, and what reads a message: each refused on the other kind of handler. */
const HTTP_ONLY = ['identity', 'missingHeader', 'fingerprint'] as const;
const MESSAGE_ONLY = ['keyFrom', 'missingKey', 'ack', 'maxAttempts'] as const;

/**
 * Validates `@Idempotent()` options against the module's; `where` names the handler in errors.
 * `message`: the handler is a `@MessagePattern()` / `@EventPattern()` one.
 */
export function resolveRouteOptions(
  where: string,
  id: string,
  route: IdempotentOptions,
  module: ResolvedIdempotencyOptions,
  message = false,
): ResolvedRouteOptions {
  if (route === null || typeof route !== 'object') fail(where, CONFIG_ERRORS.notAnObject);
  refuseUnknownKeys(where, route, ROUTE_KEYS, undefined);
  const [wrong, handlers] = message ? [HTTP_ONLY, 'HTTP routes'] : [MESSAGE_ONLY, 'message handlers'];
  for (const option of wrong) if (route[option] !== undefined) fail(where, CONFIG_ERRORS.onlyOn(option, handlers));
  const { keyFrom, ack = false } = route;
  if (keyFrom !== undefined && typeof keyFrom !== 'function') fail(where, CONFIG_ERRORS.keyFrom);
  if (typeof ack !== 'boolean') fail(where, CONFIG_ERRORS.ack);
  const transactional = route.transactional ?? false;
  if (typeof transactional !== 'boolean') fail(where, CONFIG_ERRORS.transactional);
  if (transactional && !module.transactions) fail(where, CONFIG_ERRORS.noTransactions);
  if (transactional && typeof module.store.completeIn !== 'function') fail(where, CONFIG_ERRORS.transactionalStore);
  const fingerprint = fingerprintMode(where, route.fingerprint, module.fingerprint);
  return {
    id,
    ttlMs: integerIn(where, 'ttlMs', route.ttlMs, module.ttlMs, 1, MAX_TTL_MS),
    missingHeader: message
      ? missingHeaderPolicy(where, route.missingKey, 'reject', 'missingKey')
      : missingHeaderPolicy(where, route.missingHeader, module.missingHeader),
    fingerprint,
    fingerprintTag:
      typeof fingerprint === 'function' ? functionTag(fingerprint) : fingerprint === 'raw' ? RAW_TAG : CANONICAL_TAG,
    // A message is in no caller's scope: the module's resolver reads HTTP requests.
    identity: message ? undefined : 'identity' in route ? identityOption(where, route.identity) : module.identity,
    transactional,
    leaseMs: transactional ? module.transactionTimeoutMs : module.leaseMs,
    ...(message && {
      message: { keyFrom, ack, maxAttempts: integerIn(where, 'maxAttempts', route.maxAttempts, DEFAULT_MAX_ATTEMPTS, 1, 1_000) },
    }),
  };
}
