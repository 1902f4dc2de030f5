import { hash } from 'node:crypto';

// A stored fingerprint names the algorithm that made it, so a deploy that changes the fingerprint
// setting can still recognise an honest retry of a request fingerprinted before: "<tag>:<hash>".
// The default (canonical) carries no tag, which makes every record written before tags existed a
// canonical one, and costs the default path nothing.

/** Tag of a fingerprint over the request's bytes (`fingerprint: 'raw'`). */
export const RAW_TAG = 'r1';
/** The canonical fingerprint's tag: none. */
export const CANONICAL_TAG = '';

/**
 * Tag of a fingerprint function: `f1-` and a hash of its source text. A function cannot be named
 * otherwise across deploys; editing it (or compiling it differently) changes the tag, which makes
 * records it fingerprinted before unverifiable rather than mismatched.
 */
export function functionTag(fn: (...args: never[]) => unknown): string {
  return `f1-${hash('sha256', fn.toString(), 'base64url').slice(0, 8)}`;
}

/** `hash` under `tag`, as stored. */
export function tagged(tag: string, value: string): string {
  return tag === CANONICAL_TAG ? value : `${tag}:${value}`;
}

/** The tag of a stored fingerprint; {@link CANONICAL_TAG} when it has none. */
export function tagOf(stored: string): string {
  const colon = stored.lastIndexOf(':');
  return colon === -1 ? CANONICAL_TAG : stored.slice(0, colon);
}
