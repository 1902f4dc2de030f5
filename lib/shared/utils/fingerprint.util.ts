import { createHash, hash as oneShotHash } from 'node:crypto';

/** Thrown for a body nested too deeply to serialise; the interceptor answers 400. */
export class BodyTooDeepError extends Error {}

/**
 * Query in canonical form: parameters sorted by name, the values of a repeated name kept in their
 * order (URLSearchParams.sort() is stable), percent-encoding normalised by re-serialising.
 */
export function canonicalQuery(rawQuery: string): string {
  if (rawQuery === '') return '';
  const params = new URLSearchParams(rawQuery);
  params.sort();
  return params.toString();
}

// The general form: JSON.stringify with a replacer that returns a sorted copy of each plain object.
// The copy's keys come out in a canonical order (integer-like keys first, ascending, as V8 enumerates
// them; the rest sorted), which depends only on the set of keys. Correct for anything, but the
// replacer is a call from C++ into JS for every value of the body.
function sortKeys(_key: string, value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  // No prototype: on a plain object, `sorted['__proto__'] = v` would set the prototype instead of
  // copying the key, and bodies differing only inside a "__proto__" key would share a fingerprint.
  const sorted = Object.create(null) as Record<string, unknown>;
  for (const k of Object.keys(value).sort()) sorted[k] = (value as Record<string, unknown>)[k];
  return sorted;
}

/**
 * Thrown by {@link sorted} for what only the general form writes as JSON.stringify would. One
 * instance, made once: throwing it costs no stack trace.
 */
const GENERAL = new Error('general form');

function inOrder(keys: string[]): boolean {
  for (let i = 1; i < keys.length; i++) if (!(keys[i - 1] < keys[i])) return false;
  return true;
}

// Called for every value of the body: objects recurse, scalars come back as they are.
function sortedValue(value: unknown): unknown {
  if (typeof value !== 'object') {
    if (typeof value === 'bigint') throw GENERAL;
    return value;
  }
  return value === null ? value : sorted(value);
}

/**
 * The fast form, for what body parsers produce (plain objects, arrays, scalars): `value` with every
 * object's keys in sorted order, for native JSON.stringify to write without a replacer. A subtree
 * already in order is returned as it is, so only objects with unsorted keys (and their ancestors) are
 * copied. Anything else (toJSON, a class instance, a BigInt, a "__proto__" key, whose text the
 * general form decides) throws {@link GENERAL}.
 */
function sorted(value: object): unknown {
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') throw GENERAL;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      const out = sortedValue(item);
      if (out !== item && !copy) copy = value.slice(0, i);
      if (copy) copy[i] = out;
    }
    return copy ?? value;
  }
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) throw GENERAL;
  const keys = Object.keys(value);
  const ordered = inOrder(keys);
  if (!ordered) keys.sort();
  let copy: Record<string, unknown> | undefined = ordered ? undefined : {};
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i];
    // On a copy, `copy['__proto__'] = v` would set its prototype. Integer-like keys need nothing:
    // V8 writes them first, ascending, in any object, which is where the general form puts them.
    if (key === '__proto__') throw GENERAL;
    const item = (value as Record<string, unknown>)[key];
    const out = sortedValue(item);
    if (copy) copy[key] = out;
    else if (out !== item) {
      copy = {};
      for (let j = 0; j < i; j++) copy[keys[j]] = (value as Record<string, unknown>)[keys[j]];
      copy[key] = out;
    }
  }
  return copy ?? value;
}

/**
 * `value` with every object's keys in canonical order, for native JSON.stringify; `undefined` when
 * only the replacer writes it exactly (see {@link sorted}).
 */
export function sortedForStringify(value: object): unknown {
  try {
    return sorted(value);
  } catch (err) {
    if (err === GENERAL) return undefined;
    throw err;
  }
}

/**
 * The parsed body as JSON with object keys sorted: a retry that re-serialises the same data in
 * another key order (another process, another JSON library) has the same fingerprint. Two ways to
 * the same text: sorted copies written natively (about 3x faster for a small body, 2x for 1 MiB), and
 * the replacer for whatever else a body can be, and when the copies run out of stack first.
 */
export function canonicalJson(value: unknown): string {
  try {
    return JSON.stringify(sortedValue(value)) ?? 'null';
  } catch (err) {
    if (err !== GENERAL && !(err instanceof RangeError)) throw err;
  }
  try {
    return JSON.stringify(value, sortKeys) ?? 'null';
  } catch (err) {
    // Only attacker-chosen nesting overflows the stack here.
    if (err instanceof RangeError) throw new BodyTooDeepError();
    throw err;
  }
}

// Each part is written as "<tag><length>:<value>", so no two different part lists hash the same input.
function part(tag: string, value: string): string {
  return `${tag}${value.length}:${value}`;
}

/**
 * SHA-256 over handler, method, path, canonical query and canonical body, length-delimited.
 * `url` is the request target as received (path and query); `handler` names the route's handler
 * (`Controller.method`), so the same path routed to another handler (a version) is another request.
 */
export function requestFingerprint(method: string, url: string, body: unknown, handler: string): string {
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const query = q === -1 ? '' : canonicalQuery(url.slice(q + 1));
  const head = part('h', handler) + part('m', method) + part('p', path) + part('q', query);
  // One update for the common case: every native call into the hash has a fixed cost.
  if (body instanceof Uint8Array) {
    const hash = createHash('sha256').update(`${head}b${body.length}:`);
    return hash.update(body).digest('base64url');
  }
  let tail: string;
  if (body === undefined || body === null) tail = 'n';
  else if (typeof body === 'string') tail = part('s', body);
  else tail = part('j', canonicalJson(body));
  return oneShotHash('sha256', head + tail, 'base64url');
}
