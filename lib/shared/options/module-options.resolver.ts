import { Logger } from '@nestjs/common';
import {
  DEFAULT_HEADER_NAME,
  DEFAULT_KEY_PREFIX,
  DEFAULT_LEASE_MS,
  DEFAULT_MAX_MUTATIONS_PER_REQUEST,
  DEFAULT_MAX_WAITERS,
  DEFAULT_MAX_HOLD_MS,
  DEFAULT_MAX_KEY_LENGTH,
  DEFAULT_MAX_RESPONSE_BYTES,
  MAX_RESPONSE_BYTES,
  DEFAULT_MAX_SCOPE_LENGTH,
  DEFAULT_TRANSACTION_TIMEOUT_MS,
  DEFAULT_TTL_MS,
  DEFAULT_WAIT_MS,
  MAX_TIMER_MS,
  MAX_TTL_MS,
  REPLAYED_HEADER,
} from '../idempotency.constants.js';
import { CONFIG_ERRORS } from '../messages/config.messages.js';
import { LOGS } from '../messages/operator.messages.js';
import type { IdempotencyModuleOptions } from '../interfaces/idempotency-module-options.interface.js';
import type { IdempotencyStore } from '../../stores/contract/idempotency-store.interface.js';
import type { ResolvedIdempotencyOptions } from '../interfaces/resolved-options.interface.js';
import {
  completerOption,
  booleanOption,
  errorBodyOption,
  errorFormat,
  encryptionOption,
  eventsOption,
  fail,
  fingerprintMode,
  identityOption,
  inFlightPolicy,
  integerIn,
  missingHeaderPolicy,
  problemTypeBaseUrl,
  refuseUnknownKeys,
  replayFlag,
  transactionsOption,
} from './option.validators.js';

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** The deprecated `cache` option is worth one warning per process, not one per registration. */
let warnedCache = false;
const STORE_METHODS = ['claim', 'commit', 'release', 'renew'] as const;

const MODULE_KEYS = [
  'store',
  'ttlMs',
  'leaseMs',
  'maxHoldMs',
  'maxResponseBytes',
  'headerName',
  'keyPrefix',
  'maxKeyLength',
  'maxScopeLength',
  'missingHeader',
  'fingerprint',
  'errorFormat',
  'problemTypeBaseUrl',
  'errorBody',
  'echoKeyHeader',
  'openApi',
  'events',
  'encryption',
  'openTelemetry',
  'replayFlag',
  'replayedHeader',
  'identity',
  'transactions',
  'transactionTimeoutMs',
  'inFlight',
  'waitMs',
  'maxWaiters',
  'maxMutationsPerRequest',
  'completer',
] as const;

/**
 * Validates module options and fills in defaults; throws a plain Error naming the bad option.
 * `defaultStore` builds the store used when `store` is not given (the module decides which);
 * `registration` names the call the options came through (`forRoot()` or `forRootAsync()`).
 */
export function resolveModuleOptions(
  options: IdempotencyModuleOptions,
  defaultStore: () => IdempotencyStore,
  registration?: string,
): ResolvedIdempotencyOptions {
  const where = 'IdempotencyModule';
  if (options === null || typeof options !== 'object') fail(where, CONFIG_ERRORS.notAnObject);
  // `cache` is accepted but not offered: the deprecated name of `store`.
  const { cache: _deprecated, ...named } = options;
  refuseUnknownKeys(where, named, MODULE_KEYS, registration);
  if (options.store !== undefined && options.cache !== undefined) fail(where, CONFIG_ERRORS.storeTwice);
  if (options.cache !== undefined && !warnedCache) {
    warnedCache = true;
    new Logger('Idempotency').warn(LOGS.cacheDeprecated);
  }
  const store = options.store ?? options.cache ?? defaultStore();
  for (const method of STORE_METHODS) {
    if (typeof (store as unknown as Record<string, unknown>)[method] !== 'function') {
      fail(where, CONFIG_ERRORS.notAStore(options.cache === undefined ? 'store' : 'cache', store, method));
    }
  }
  const headerName = options.headerName ?? DEFAULT_HEADER_NAME;
  if (typeof headerName !== 'string' || !TOKEN.test(headerName)) fail(where, CONFIG_ERRORS.headerName);
  const keyPrefix = options.keyPrefix ?? DEFAULT_KEY_PREFIX;
  // eslint-disable-next-line no-control-regex -- control characters are exactly what it looks for
  if (typeof keyPrefix !== 'string' || /[\x00-\x20\x7f]/.test(keyPrefix)) fail(where, CONFIG_ERRORS.keyPrefix);
  const replay = replayFlag(where, options.replayFlag);
  const replayedHeader = options.replayedHeader ?? REPLAYED_HEADER;
  if (replayedHeader !== false && (typeof replayedHeader !== 'string' || !TOKEN.test(replayedHeader))) {
    fail(where, CONFIG_ERRORS.replayedHeader);
  }
  // Timer-driven durations stop at what setTimeout can wait: past it Node fires after 1 ms.
  const leaseMs = integerIn(where, 'leaseMs', options.leaseMs, DEFAULT_LEASE_MS, 3, MAX_TIMER_MS);
  return {
    store,
    ttlMs: integerIn(where, 'ttlMs', options.ttlMs, DEFAULT_TTL_MS, 1, MAX_TTL_MS),
    leaseMs,
    maxHoldMs: integerIn(where, 'maxHoldMs', options.maxHoldMs, Math.max(DEFAULT_MAX_HOLD_MS, leaseMs), leaseMs, MAX_TIMER_MS),
    maxResponseBytes: integerIn(
      where,
      'maxResponseBytes',
      options.maxResponseBytes,
      DEFAULT_MAX_RESPONSE_BYTES,
      1,
      MAX_RESPONSE_BYTES,
    ),
    headerName: headerName.toLowerCase(),
    keyPrefix,
    maxKeyLength: integerIn(where, 'maxKeyLength', options.maxKeyLength, DEFAULT_MAX_KEY_LENGTH, 1, Number.MAX_SAFE_INTEGER),
    maxScopeLength: integerIn(
      where,
      'maxScopeLength',
      options.maxScopeLength,
      DEFAULT_MAX_SCOPE_LENGTH,
      1,
      Number.MAX_SAFE_INTEGER,
    ),
    missingHeader: missingHeaderPolicy(where, options.missingHeader, 'reject'),
    fingerprint: fingerprintMode(where, options.fingerprint, 'canonical'),
    errorFormat: errorFormat(where, options.errorFormat),
    problemTypeBaseUrl: problemTypeBaseUrl(where, options.problemTypeBaseUrl),
    errorBody: errorBodyOption(where, options.errorBody),
    echoKeyHeader: booleanOption(where, 'echoKeyHeader', options.echoKeyHeader, false),
    openApi: booleanOption(where, 'openApi', options.openApi, true),
    events: eventsOption(where, options.events),
    encryption: encryptionOption(where, options.encryption),
    openTelemetry: booleanOption(where, 'openTelemetry', options.openTelemetry, true),
    replayFlag: replay,
    replayedHeader: replay === 'body' || replayedHeader === false ? false : replayedHeader.toLowerCase(),
    identity: identityOption(where, options.identity),
    transactions: transactionsOption(where, options.transactions),
    transactionTimeoutMs: integerIn(
      where,
      'transactionTimeoutMs',
      options.transactionTimeoutMs,
      DEFAULT_TRANSACTION_TIMEOUT_MS,
      3,
      MAX_TIMER_MS,
    ),
    inFlight: inFlightPolicy(where, options.inFlight, 'conflict'),
    waitMs: integerIn(where, 'waitMs', options.waitMs, DEFAULT_WAIT_MS, 1, MAX_TIMER_MS),
    maxWaiters: integerIn(where, 'maxWaiters', options.maxWaiters, DEFAULT_MAX_WAITERS, 1, 1_000_000),
    maxMutationsPerRequest: integerIn(
      where,
      'maxMutationsPerRequest',
      options.maxMutationsPerRequest,
      DEFAULT_MAX_MUTATIONS_PER_REQUEST,
      1,
      1_000,
    ),
    completer: completerOption(where, options.completer),
  };
}
