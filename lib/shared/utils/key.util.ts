import { MESSAGES } from '../messages/client.messages.js';

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
    // Past ASCII, what no header can carry and no one can see: C1 controls (NEL), line and paragraph
    // separators, zero-width and direction marks, the BOM. A message id or an argument could hold them.
    if (c >= 0x80 && (c <= 0x9f || INVISIBLE.test(value[i]))) return MESSAGES.forbiddenChar(what, i);
  }
  return undefined;
}

/** Invisible and separator characters a key must not hold (see {@link keyViolation}). */
const INVISIBLE = /[\u2000-\u200f\u2028-\u202f\u205f-\u2064\u3000\ufeff]/;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The key as the client meant it. The IETF draft (draft-ietf-httpapi-idempotency-key-header-07 §2.1)
 * makes the header a Structured Field String (RFC 9651 §3.3.3): `"8e03978e-40d5"` is unquoted and
 * unescaped, so it is the same key as the bare `8e03978e-40d5` that most clients send, which is
 * taken as it is. `undefined` for a malformed string: unterminated, a backslash before anything but
 * `"` or `\`, a character outside 0x20-0x7E, or anything (parameters) after the closing quote.
 */
export function decodeKey(value: string): string | undefined {
  if (value.charCodeAt(0) !== QUOTE) return value;
  let decoded = '';
  let from = 1;
  for (let i = 1; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === BACKSLASH) {
      const next = value.charCodeAt(i + 1);
      if (next !== QUOTE && next !== BACKSLASH) return undefined;
      decoded += value.slice(from, i);
      from = ++i;
    } else if (c === QUOTE) {
      return i === value.length - 1 ? decoded + value.slice(from, i) : undefined;
    } else if (c < 0x20 || c > 0x7e) {
      return undefined;
    }
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

/** The surfaces whose records each handler keeps apart from HTTP's and from every other handler's. */
export type Surface = 'graphql' | 'message' | 'inbox';

/**
 * After the caller's scope: `%` and a letter. Escaped scopes hold `%` only as `%25` or `%3A`, so no
 * HTTP scope holds one of these, and an HTTP client's key can never name a message's or a mutation's record.
 */
const SURFACE_MARKS: Readonly<Record<Surface, string>> = { graphql: '%G', message: '%M', inbox: '%I' };

/**
 * The scope segment of a record of `owner` (a mutation's or message handler's `Class.method`, an
 * inbox consumer) on `surface`, under the caller's escaped `scope`: one handler's records never meet
 * another's, nor an HTTP route's.
 */
export function surfaceScope(scope: string, surface: Surface, owner: string): string {
  return scope + SURFACE_MARKS[surface] + escapeScope(owner);
}

/**
 * `<prefix><scope>:<key>`. The scope segment holds no `:`, so the first `:` after the prefix splits
 * it from the key, and (prefix, scope, key) maps to one cache key and back.
 */
export function storeKey(prefix: string, escapedScope: string, key: string): string {
  return `${prefix}${escapedScope}:${key}`;
}
