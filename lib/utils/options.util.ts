import type { IdempotencyStore } from '../cache/idempotency-store.interface.js';
import { InMemoryCache } from '../cache/in-memory.cache.js';
import {
  DEFAULT_HEADER_NAME,
  DEFAULT_KEY_PREFIX,
  DEFAULT_LEASE_MS,
  DEFAULT_MAX_KEY_LENGTH,
  DEFAULT_MAX_SCOPE_LENGTH,
  DEFAULT_TTL_MS,
} from '../idempotency.constants.js';
import type { IdempotencyModuleOptions } from '../interfaces/idempotency-module-options.interface.js';
import type { IdempotentOptions, MissingHeaderPolicy } from '../interfaces/idempotent-options.interface.js';
import type { IdempotencyIdentity } from '../interfaces/identity-resolver.interface.js';

/** Module options with every default filled in; built once at startup. */
export interface ResolvedIdempotencyOptions {
  readonly store: IdempotencyStore;
  readonly ttlMs: number;
  readonly leaseMs: number;
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

function fail(where: string, message: string): never {
  throw new Error(`${where}: ${message}`);
}

function positiveInteger(where: string, name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    fail(where, `${name} must be a positive integer, got ${String(value)}`);
  }
  return value;
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

/** Validates module options and fills in defaults; throws a plain Error naming the bad option. */
export function resolveModuleOptions(options: IdempotencyModuleOptions): ResolvedIdempotencyOptions {
  const where = 'IdempotencyModule';
  if (options === null || typeof options !== 'object') fail(where, 'options must be an object');
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
  const ttlMs = positiveInteger(where, 'ttlMs', options.ttlMs, DEFAULT_TTL_MS);
  const leaseMs = positiveInteger(where, 'leaseMs', options.leaseMs, DEFAULT_LEASE_MS);
  if (leaseMs < 3) fail(where, 'leaseMs must be at least 3 (it is renewed every third)');
  return {
    store,
    ttlMs,
    leaseMs,
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
  readonly ttlMs: number;
  readonly missingHeader: MissingHeaderPolicy;
  readonly identity: IdempotencyIdentity | undefined;
}

/** Validates `@Idempotent()` options against the module's; `where` names the handler in errors. */
export function resolveRouteOptions(
  where: string,
  route: IdempotentOptions,
  module: ResolvedIdempotencyOptions,
): ResolvedRouteOptions {
  return {
    ttlMs: positiveInteger(where, 'ttlMs', route.ttlMs, module.ttlMs),
    missingHeader: missingHeaderPolicy(where, route.missingHeader, module.missingHeader),
    identity: 'identity' in route ? identityOption(where, route.identity) : module.identity,
  };
}
