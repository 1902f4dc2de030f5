import { CONFIG_ERRORS } from '../messages/config.messages.js';
import { DEFAULT_COMPLETER, DEFAULT_PROBLEM_TYPE_BASE_URL, MAX_TIMER_MS } from '../idempotency.constants.js';
import type { CompleterOptions } from '../interfaces/idempotency-module-options.interface.js';
import type { IdempotencyEventsOption } from '../interfaces/idempotency-event.interface.js';
import type { IdempotencyEncryption, ResolvedEncryption } from '../interfaces/idempotency-encryption.interface.js';
import type {
  ErrorFormat,
  FingerprintMode,
  InFlightPolicy,
  MissingHeaderPolicy,
  ReplayFlag,
} from '../interfaces/idempotent-options.interface.js';
import type { IdempotencyErrorBody } from '../interfaces/idempotency-error.interface.js';
import type { IdempotencyTransactions } from '../interfaces/idempotency-transactions.interface.js';
import type { IdempotencyIdentity } from '../interfaces/identity-resolver.interface.js';

/** Keys of forRoot()/forRootAsync() themselves: they decide how the module is registered. */
const REGISTRATION_KEYS = new Set(['isGlobal', 'imports', 'inject', 'useFactory', 'useClass', 'useExisting', 'extraProviders']);
/** Slips too far from the right name for an edit distance to find it. */
const SLIPS: Readonly<Record<string, string>> = { header: 'headerName', prefix: 'keyPrefix' };

/** Throws the startup error for an option; `where` names what was being configured. */
export function fail(where: string, message: string): never {
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
function nearestKey(key: string, valid: readonly string[]): string | undefined {
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

/** Fails on a key no option has: a slip like `header` for `headerName` would otherwise start on defaults. */
export function refuseUnknownKeys(
  where: string,
  options: object,
  valid: readonly string[],
  registration: string | undefined,
): void {
  for (const key of Object.keys(options)) {
    if (valid.includes(key)) continue;
    if (registration && REGISTRATION_KEYS.has(key)) {
      fail(
        where,
        registration === 'forRoot()' ? CONFIG_ERRORS.forRootAsyncOnly(key) : CONFIG_ERRORS.registrationOnly(key, registration),
      );
    }
    fail(where, CONFIG_ERRORS.unknownOption(key, nearestKey(key, valid), valid));
  }
}

export function integerIn(where: string, name: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  // Number.isSafeInteger is false for anything but a number.
  const n = value as number;
  if (!Number.isSafeInteger(n) || n < min || n > max) fail(where, CONFIG_ERRORS.integer(name, min, max, value));
  return n;
}

export function missingHeaderPolicy(
  where: string,
  value: unknown,
  fallback: MissingHeaderPolicy,
  name?: string,
): MissingHeaderPolicy {
  return oneOf(where, name ?? 'missingHeader', value, ['reject', 'pass-through'], fallback);
}

/** One of `allowed`, or `fallback` when not given. */
function oneOf<T extends string>(where: string, name: string, value: unknown, allowed: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if (!allowed.includes(value as T)) fail(where, CONFIG_ERRORS.oneOf(name, allowed, value));
  return value as T;
}

export function inFlightPolicy(where: string, value: unknown, fallback: InFlightPolicy): InFlightPolicy {
  return oneOf(where, 'inFlight', value, ['conflict', 'wait'], fallback);
}

export function fingerprintMode(where: string, value: unknown, fallback: FingerprintMode): FingerprintMode {
  if (value === undefined) return fallback;
  if (value !== 'canonical' && value !== 'raw' && typeof value !== 'function') fail(where, CONFIG_ERRORS.fingerprint(value));
  return value as FingerprintMode;
}

export function errorFormat(where: string, value: unknown): ErrorFormat {
  return oneOf(where, 'errorFormat', value, ['json', 'problem+json'], 'json');
}

// A URI scheme and no white space or control character: what RFC 3986 needs of an absolute URI's start.
// eslint-disable-next-line no-control-regex -- control characters are exactly what it refuses
const URI_PREFIX = /^[A-Za-z][A-Za-z0-9+.-]*:[^\s\x00-\x1f\x7f]*$/;

export function problemTypeBaseUrl(where: string, value: unknown): string {
  if (value === undefined) return DEFAULT_PROBLEM_TYPE_BASE_URL;
  if (typeof value !== 'string' || !URI_PREFIX.test(value)) fail(where, CONFIG_ERRORS.problemTypeBaseUrl);
  return value;
}

export function replayFlag(where: string, value: unknown): ReplayFlag {
  return oneOf(where, 'replayFlag', value, ['header', 'body', 'header-and-body'], 'header');
}

export function errorBodyOption(where: string, value: unknown): IdempotencyErrorBody | undefined {
  if (value !== undefined && typeof value !== 'function') fail(where, CONFIG_ERRORS.errorBody);
  return value as IdempotencyErrorBody | undefined;
}

export function eventsOption(where: string, value: unknown): IdempotencyEventsOption | undefined {
  if (value !== undefined && typeof value !== 'function') fail(where, CONFIG_ERRORS.events);
  return value as IdempotencyEventsOption | undefined;
}

const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;
const AES_256_KEY_BYTES = 32;

export function encryptionOption(where: string, value: unknown): ResolvedEncryption | undefined {
  if (value === undefined) return undefined;
  const { keys, current, acceptUnsealedUntil } = (value ?? {}) as Partial<IdempotencyEncryption>;
  if (typeof value !== 'object' || value === null || typeof keys !== 'object' || keys === null) {
    fail(where, CONFIG_ERRORS.encryption);
  }
  const copies = new Map<string, Buffer>();
  for (const [id, key] of Object.entries(keys)) {
    if (!KEY_ID.test(id)) fail(where, CONFIG_ERRORS.encryptionKeyId(id));
    if (!(key instanceof Uint8Array) || key.length !== AES_256_KEY_BYTES) fail(where, CONFIG_ERRORS.encryptionKey(id));
    // A copy: the application may reuse or zero its buffer.
    copies.set(id, Buffer.from(key));
  }
  if (typeof current !== 'string' || !copies.has(current)) fail(where, CONFIG_ERRORS.encryptionCurrent);
  const until = acceptUnsealedUntil instanceof Date ? acceptUnsealedUntil.getTime() : (acceptUnsealedUntil ?? 0);
  if (!Number.isSafeInteger(until) || until < 0) fail(where, CONFIG_ERRORS.acceptUnsealedUntil);
  return { keys: copies, current, acceptUnsealedUntil: until };
}

export function booleanOption(where: string, name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') fail(where, CONFIG_ERRORS.boolean(name, value));
  return value;
}

export function identityOption(where: string, value: unknown): IdempotencyIdentity | undefined {
  if (value !== undefined && typeof value !== 'function') fail(where, CONFIG_ERRORS.identity);
  return value as IdempotencyIdentity | undefined;
}

export function transactionsOption(where: string, value: unknown): IdempotencyTransactions | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || typeof (value as Record<string, unknown>).run !== 'function') {
    fail(where, CONFIG_ERRORS.transactions);
  }
  return value as IdempotencyTransactions;
}

const SQL_IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** A name the SQL stores put in their statements (quoted): letters, digits and `_`, as PostgreSQL allows unquoted. */
export function sqlIdentifier(where: string, name: string, value: unknown): string {
  if (typeof value !== 'string' || !SQL_IDENTIFIER.test(value)) fail(where, CONFIG_ERRORS.identifier(name));
  return value;
}

/** The completer's options: off (no interval) unless given. */
export function completerOption(where: string, value: unknown): Required<CompleterOptions> {
  if (value === undefined) return { ...DEFAULT_COMPLETER, intervalMs: 0 };
  if (value === null || typeof value !== 'object') fail(where, CONFIG_ERRORS.completer);
  const given = value as CompleterOptions;
  refuseUnknownKeys(`${where} completer`, given, Object.keys(DEFAULT_COMPLETER), undefined);
  return {
    intervalMs: integerIn(where, 'completer.intervalMs', given.intervalMs, DEFAULT_COMPLETER.intervalMs, 0, MAX_TIMER_MS),
    idleMs: integerIn(where, 'completer.idleMs', given.idleMs, DEFAULT_COMPLETER.idleMs, 0, MAX_TIMER_MS),
    batch: integerIn(where, 'completer.batch', given.batch, DEFAULT_COMPLETER.batch, 1, 1_000),
  };
}
