import type { IdempotencyStore } from '../cache/idempotency-store.interface.js';
import { InMemoryCache } from '../cache/in-memory.cache.js';
import {
  DEFAULT_HEADER_NAME,
  DEFAULT_KEY_PREFIX,
  DEFAULT_LEASE_MS,
  DEFAULT_MAX_HOLD_MS,
  DEFAULT_MAX_KEY_LENGTH,
  DEFAULT_MAX_SCOPE_LENGTH,
  DEFAULT_TTL_MS,
  MAX_TIMER_MS,
  MAX_TTL_MS,
} from '../idempotency.constants.js';
import type { IdempotencyModuleOptions } from '../interfaces/idempotency-module-options.interface.js';
import type { IdempotentOptions, MissingHeaderPolicy } from '../interfaces/idempotent-options.interface.js';
import type { IdempotencyIdentity } from '../interfaces/identity-resolver.interface.js';

/** Module options with every default filled in; built once at startup. */
export interface ResolvedIdempotencyOptions {
  readonly store: IdempotencyStore;
  readonly ttlMs: number;
  readonly leaseMs: number;
  readonly maxHoldMs: number;
  /** Lower case, as Node hands header names over. */
  readonly headerName: string;
  readonly keyPrefix: string;
  readonly maxKeyLength: number;
  readonly maxScopeLength: number;
  readonly missingHeader: MissingHeaderPolicy;
  readonly identity: IdempotencyIdentity | undefined;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const STORE_METHODS = ['claim', 'commit', 'release', 'renew'] as const;

const MODULE_KEYS = [
  'cache',
  'ttlMs',
  'leaseMs',
  'maxHoldMs',
  'headerName',
  'keyPrefix',
  'maxKeyLength',
  'maxScopeLength',
  'missingHeader',
  'identity',
] as const;
const ROUTE_KEYS = ['ttlMs', 'identity', 'missingHeader'] as const;
/** Keys of forRoot()/forRootAsync() themselves: they decide how the module is registered. */
const REGISTRATION_KEYS = new Set(['isGlobal', 'imports', 'inject', 'useFactory', 'useClass', 'useExisting', 'extraProviders']);
/** Slips too far from the right name for an edit distance to find it. */
const SLIPS: Readonly<Record<string, string>> = { store: 'cache', header: 'headerName', prefix: 'keyPrefix' };

function fail(where: string, message: string): never {
  throw new Error(`${where}: ${message}`);
}

function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    row = next;
  }
  return row[b.length];
}

/** The valid key a misspelt one most likely meant, if any is close. */
export function nearestKey(key: string, valid: readonly string[]): string | undefined {
  const lower = key.toLowerCase();
  if (SLIPS[lower] && valid.includes(SLIPS[lower])) return SLIPS[lower];
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of valid) {
    const d = distance(lower, candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/** Fails on a key no option has: a slip like `store` for `cache` would otherwise start on defaults. */
function refuseUnknownKeys(where: string, options: object, valid: readonly string[], registration: string | undefined): void {
  for (const key of Object.keys(options)) {
    if (valid.includes(key)) continue;
    if (registration && REGISTRATION_KEYS.has(key)) {
      fail(
        where,
        registration === 'forRoot()'
          ? `${key} is an option of forRootAsync(), not of forRoot()`
          : `${key} is an option of ${registration} itself; the options its factory returns cannot change how the module is registered`,
      );
    }
    const near = nearestKey(key, valid);
    fail(where, `unknown option ${JSON.stringify(key)}${near ? ` (did you mean ${near}?)` : ''}; valid: ${valid.join(', ')}`);
  }
}

function integerIn(where: string, name: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  // Number.isSafeInteger is false for anything but a number.
  const n = value as number;
  if (!Number.isSafeInteger(n) || n < min || n > max) fail(where, `${name} must be an integer from ${min} to ${max}, got ${String(value)}`);
  return n;
}

function positiveInteger(where: string, name: string, value: unknown, fallback: number): number {
  return integerIn(where, name, value, fallback, 1, Number.MAX_SAFE_INTEGER);
}

function missingHeaderPolicy(where: string, value: unknown, fallback: MissingHeaderPolicy): MissingHeaderPolicy {
  if (value === undefined) return fallback;
  if (value !== 'reject' && value !== 'pass-through') {
    fail(where, `missingHeader must be 'reject' or 'pass-through', got ${String(value)}`);
  }
  return value;
}

function identityOption(where: string, value: unknown): IdempotencyIdentity | undefined {
  if (value !== undefined && typeof value !== 'function') {
    fail(where, 'identity must be a function (req) => string or an injectable resolver class');
  }
  return value as IdempotencyIdentity | undefined;
}

/**
 * Validates module options and fills in defaults; throws a plain Error naming the bad option.
 * `registration` names the call the options came through (`forRoot()` or `forRootAsync()`).
 */
export function resolveModuleOptions(options: IdempotencyModuleOptions, registration?: string): ResolvedIdempotencyOptions {
  const where = 'IdempotencyModule';
  if (options === null || typeof options !== 'object') fail(where, 'options must be an object');
  refuseUnknownKeys(where, options, MODULE_KEYS, registration);
  const store = options.cache ?? new InMemoryCache();
  for (const method of STORE_METHODS) {
    if (typeof (store as unknown as Record<string, unknown>)[method] !== 'function') {
      fail(where, `cache must implement IdempotencyStore (missing ${method}())`);
    }
  }
  const headerName = options.headerName ?? DEFAULT_HEADER_NAME;
  if (typeof headerName !== 'string' || !TOKEN.test(headerName)) {
    fail(where, 'headerName must be a valid HTTP header name');
  }
  const keyPrefix = options.keyPrefix ?? DEFAULT_KEY_PREFIX;
  if (typeof keyPrefix !== 'string' || /[\x00-\x20\x7f]/.test(keyPrefix)) {
    fail(where, 'keyPrefix must be a string without control characters or spaces');
  }
  // Timer-driven durations stop at what setTimeout can wait: past it Node fires after 1 ms.
  const leaseMs = integerIn(where, 'leaseMs', options.leaseMs, DEFAULT_LEASE_MS, 3, MAX_TIMER_MS);
  return {
    store,
    ttlMs: integerIn(where, 'ttlMs', options.ttlMs, DEFAULT_TTL_MS, 1, MAX_TTL_MS),
    leaseMs,
    maxHoldMs: integerIn(where, 'maxHoldMs', options.maxHoldMs, Math.max(DEFAULT_MAX_HOLD_MS, leaseMs), leaseMs, MAX_TIMER_MS),
    headerName: headerName.toLowerCase(),
    keyPrefix,
    maxKeyLength: positiveInteger(where, 'maxKeyLength', options.maxKeyLength, DEFAULT_MAX_KEY_LENGTH),
    maxScopeLength: positiveInteger(where, 'maxScopeLength', options.maxScopeLength, DEFAULT_MAX_SCOPE_LENGTH),
    missingHeader: missingHeaderPolicy(where, options.missingHeader, 'reject'),
    identity: identityOption(where, options.identity),
  };
}

/** The options one route runs with: the module's, overridden by its `@Idempotent()` options. */
export interface ResolvedRouteOptions {
  /** `Controller.method`: part of the fingerprint (a key sent to another handler is a 422) and of log lines. */
  readonly id: string;
  readonly ttlMs: number;
  readonly missingHeader: MissingHeaderPolicy;
  readonly identity: IdempotencyIdentity | undefined;
}

/** Validates `@Idempotent()` options against the module's; `where` names the handler in errors. */
export function resolveRouteOptions(
  where: string,
  id: string,
  route: IdempotentOptions,
  module: ResolvedIdempotencyOptions,
): ResolvedRouteOptions {
  if (route === null || typeof route !== 'object') fail(where, 'options must be an object');
  refuseUnknownKeys(where, route, ROUTE_KEYS, undefined);
  return {
    id,
    ttlMs: integerIn(where, 'ttlMs', route.ttlMs, module.ttlMs, 1, MAX_TTL_MS),
    missingHeader: missingHeaderPolicy(where, route.missingHeader, module.missingHeader),
    identity: 'identity' in route ? identityOption(where, route.identity) : module.identity,
  };
}
