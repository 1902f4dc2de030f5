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

// Returns a sorted copy of each plain object JSON.stringify meets. The copy's keys come out in a
// canonical order (integer-like keys first, ascending, as V8 enumerates them; the rest sorted), which
// depends only on the set of keys. Native stringify with this replacer is about twice as fast as a
// hand-written walk (bench/), and needs no depth bookkeeping of its own.
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
 * The parsed body as JSON with object keys sorted: a retry that re-serialises the same data in
 * another key order (another process, another JSON library) has the same fingerprint.
 */
export function canonicalJson(value: unknown): string {
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
