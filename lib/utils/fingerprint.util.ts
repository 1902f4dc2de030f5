import { createHash, type Hash } from 'node:crypto';

/** Deeper bodies are refused rather than risking the stack on attacker-chosen nesting. */
export const MAX_BODY_DEPTH = 512;

/** Thrown for a body the fingerprint refuses; the interceptor answers 400. */
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

/**
 * The parsed body as JSON with object keys sorted: a retry that re-serialises the same data in
 * another key order (another process, another JSON library) has the same fingerprint.
 */
export function canonicalJson(value: unknown, depth = 0): string {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? String(value) : 'null';
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      return value.toString();
    case 'object':
      break;
    default:
      return 'null';
  }
  if (value === null) return 'null';
  if (depth >= MAX_BODY_DEPTH) throw new BodyTooDeepError();
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ',';
      out += canonicalJson(value[i], depth + 1);
    }
    return out + ']';
  }
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') return canonicalJson(toJSON.call(value), depth + 1);
  const object = value as Record<string, unknown>;
  const keys = Object.keys(object).sort();
  let out = '{';
  let first = true;
  for (const key of keys) {
    const v = object[key];
    if (v === undefined || typeof v === 'function' || typeof v === 'symbol') continue;
    if (!first) out += ',';
    first = false;
    out += JSON.stringify(key) + ':' + canonicalJson(v, depth + 1);
  }
  return out + '}';
}

// Each part is written as "<tag><length>:<bytes>", so no two different part lists hash the same input.
function part(hash: Hash, tag: string, value: string | Uint8Array): void {
  hash.update(`${tag}${value.length}:`);
  hash.update(value);
}

/**
 * SHA-256 over method, path, canonical query and canonical body, length-delimited.
 * `url` is the request target as received (path and query).
 */
export function requestFingerprint(method: string, url: string, body: unknown): string {
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const query = q === -1 ? '' : canonicalQuery(url.slice(q + 1));
  const hash = createHash('sha256');
  part(hash, 'm', method);
  part(hash, 'p', path);
  part(hash, 'q', query);
  if (body === undefined || body === null) hash.update('n');
  else if (typeof body === 'string') part(hash, 's', body);
  else if (body instanceof Uint8Array) part(hash, 'b', body);
  else part(hash, 'j', canonicalJson(body));
  return hash.digest('base64url');
}
