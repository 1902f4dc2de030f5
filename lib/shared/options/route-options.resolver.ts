import { DEFAULT_MAX_ATTEMPTS, MAX_TIMER_MS, MAX_TTL_MS } from '../idempotency.constants.js';
import { CONFIG_ERRORS } from '../messages/config.messages.js';
import type { IdempotentOptions } from '../interfaces/idempotent-options.interface.js';
import type { ResolvedIdempotencyOptions, ResolvedRouteOptions } from '../interfaces/resolved-options.interface.js';
import { CANONICAL_TAG, functionTag, RAW_TAG } from '../utils/fingerprint-tag.util.js';
import {
  fail,
  fingerprintMode,
  identityOption,
  inFlightPolicy,
  integerIn,
  missingHeaderPolicy,
  refuseUnknownKeys,
} from './option.validators.js';
import { completesInTransactions, keepsRecoveryPoints } from '../../stores/contract/store.capabilities.js';

const ROUTE_KEYS = [
  'ttlMs',
  'identity',
  'missingHeader',
  'transactional',
  'fingerprint',
  'keyFrom',
  'scope',
  'missingKey',
  'ack',
  'maxAttempts',
  'inFlight',
  'waitMs',
  'atomicPhases',
] as const;
/**
 * What a handler is: an HTTP route, a `@MessagePattern()` / `@EventPattern()` handler, or a GraphQL
 * `@Mutation()` resolver (a request over HTTP whose body is its arguments).
 */
export type RouteKind = 'http' | 'message' | 'graphql';

const KIND_NAMES: Readonly<Record<RouteKind, string>> = {
  http: 'HTTP routes',
  message: 'message handlers',
  graphql: 'GraphQL mutations',
};

/** The kinds of handler each kind-specific option belongs to; refused on the others. */
const OWNERS: Readonly<Partial<Record<keyof IdempotentOptions, readonly RouteKind[]>>> = {
  identity: ['http', 'graphql'],
  missingHeader: ['http', 'graphql'],
  fingerprint: ['http'],
  // A message's duplicate is redelivered later by its broker; a consumer never blocks on it.
  inFlight: ['http', 'graphql'],
  waitMs: ['http', 'graphql'],
  keyFrom: ['message', 'graphql'],
  scope: ['message'],
  missingKey: ['message'],
  ack: ['message'],
  maxAttempts: ['message'],
  // A run resumes on the client's retry of the same request: HTTP's.
  atomicPhases: ['http'],
};

/** Validates `@Idempotent()` options against the module's; `where` names the handler in errors. */
export function resolveRouteOptions(
  where: string,
  id: string,
  route: IdempotentOptions,
  module: ResolvedIdempotencyOptions,
  kind: RouteKind = 'http',
  event = false,
): ResolvedRouteOptions {
  if (route === null || typeof route !== 'object') fail(where, CONFIG_ERRORS.notAnObject);
  refuseUnknownKeys(where, route, ROUTE_KEYS, undefined);
  for (const [option, owners] of Object.entries(OWNERS)) {
    if (route[option as keyof IdempotentOptions] !== undefined && !owners.includes(kind)) {
      fail(where, CONFIG_ERRORS.onlyOn(option, owners.map((owner) => KIND_NAMES[owner]).join(' and ')));
    }
  }
  const message = kind === 'message';
  const { keyFrom, scope, ack = false } = route;
  if (keyFrom !== undefined && typeof keyFrom !== 'function') fail(where, CONFIG_ERRORS.keyFrom);
  if (scope !== undefined && typeof scope !== 'function') fail(where, CONFIG_ERRORS.messageScope);
  if (typeof ack !== 'boolean' && ack !== 'skipped') fail(where, CONFIG_ERRORS.ack(ack));
  const transactional = route.transactional ?? false;
  if (typeof transactional !== 'boolean') fail(where, CONFIG_ERRORS.boolean('transactional', transactional));
  if (transactional && !module.transactions) fail(where, CONFIG_ERRORS.noTransactions('transactional'));
  if (transactional && !completesInTransactions(module.store)) {
    fail(where, CONFIG_ERRORS.transactionalStore);
  }
  const atomicPhases = route.atomicPhases ?? false;
  if (typeof atomicPhases !== 'boolean') fail(where, CONFIG_ERRORS.boolean('atomicPhases', atomicPhases));
  if (atomicPhases && transactional) fail(where, CONFIG_ERRORS.phasesTransactional);
  if (atomicPhases && !module.transactions) fail(where, CONFIG_ERRORS.noTransactions('atomicPhases'));
  if (atomicPhases && !keepsRecoveryPoints(module.store)) {
    fail(where, CONFIG_ERRORS.recoveryPointsStore);
  }
  const missingHeader = message
    ? missingHeaderPolicy(where, route.missingKey, 'reject', 'missingKey')
    : missingHeaderPolicy(where, route.missingHeader, module.missingHeader);
  if (atomicPhases && missingHeader === 'pass-through') fail(where, CONFIG_ERRORS.phasesNeedKey);
  const fingerprint = fingerprintMode(where, route.fingerprint, module.fingerprint);
  return {
    id,
    ttlMs: integerIn(where, 'ttlMs', route.ttlMs, module.ttlMs, 1, MAX_TTL_MS),
    missingHeader,
    fingerprint,
    fingerprintTag:
      typeof fingerprint === 'function' ? functionTag(fingerprint) : fingerprint === 'raw' ? RAW_TAG : CANONICAL_TAG,
    // A message is in no caller's scope: the module's resolver reads HTTP requests.
    identity: message ? undefined : 'identity' in route ? identityOption(where, route.identity) : module.identity,
    settling: atomicPhases ? 'phases' : transactional ? 'transaction' : 'commit',
    waitMs: message ? 0 : waitMs(where, route, module),
    leaseMs: transactional ? module.transactionTimeoutMs : module.leaseMs,
    ...(message && {
      message: {
        keyFrom,
        scope,
        ack,
        maxAttempts: integerIn(where, 'maxAttempts', route.maxAttempts, DEFAULT_MAX_ATTEMPTS, 1, 1_000),
        event,
        broadcastWaitMs: Math.min(module.maxHoldMs + module.leaseMs, MAX_TIMER_MS),
      },
    }),
    ...(kind === 'graphql' && { graphql: { keyFrom } }),
  };
}

/** How long the route's duplicates wait: `0` unless its `inFlight`, or the module's, is `'wait'`. */
function waitMs(where: string, route: IdempotentOptions, module: ResolvedIdempotencyOptions): number {
  const waits = inFlightPolicy(where, route.inFlight, module.inFlight) === 'wait';
  const ms = integerIn(where, 'waitMs', route.waitMs, module.waitMs, 1, MAX_TIMER_MS);
  return waits ? ms : 0;
}
