import { MESSAGES } from '../idempotency.messages.js';

/**
 * Checks a client-chosen key (or an identity scope) before it reaches a cache key.
 * Returns the reason for a 400, or `undefined` when the value is acceptable. The reason names the
 * limit or the index, never the value: reflecting attacker bytes is how an error becomes a payload.
 */
export function keyViolation(what: string, value: string, length: number, max: number): string | undefined {
  // Length first: a megabyte key is refused without reading it.
  if (length > max) return MESSAGES.tooLong(what, max);
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    // Space and the control range split commands in line protocols (memcached); CR/LF inject headers.
    if (c <= 0x20 || c === 0x7f) return MESSAGES.forbiddenChar(what, i);
  }
  return undefined;
}

const SCOPE_SPECIAL = /[%:]/;

/** Escapes `%` and `:` so that a scope never contains the separator and stays readable. */
export function escapeScope(scope: string): string {
  return SCOPE_SPECIAL.test(scope) ? scope.replace(/%/g, '%25').replace(/:/g, '%3A') : scope;
}

/**
 * The segment standing for "no scope". Escaping turns every `%` into `%25`, so no escaped scope is a
 * bare `%`: scoped and unscoped keys can never meet.
 */
export const UNSCOPED = '%';

/**
 * `<prefix><scope>:<key>`. The scope segment holds no `:`, so the first `:` after the prefix splits
 * it from the key, and (prefix, scope, key) maps to one cache key and back.
 */
export function cacheKey(prefix: string, escapedScope: string, key: string): string {
  return `${prefix}${escapedScope}:${key}`;
}
