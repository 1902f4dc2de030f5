import type { RedisClientLike } from './redis-store.options.js';

// One script per operation, each a single round trip. Claims and commits take one key or many (the
// store's own client sends a turn's together, as one command); the others take one, so a Cluster
// routes each by its key. The client sends them with EVALSHA, falling back to EVAL once per script on
// NOSCRIPT. Commits, release and renew act only while the key holds the caller's claim (a commit also
// on a missing key, below): the stored value must start with "C<owner>\n"; the owner is a random
// token without newlines. That is the fencing.
const OWNS = `local v = redis.call('GET', KEYS[1])
local owns = v and string.sub(v, 1, #ARGV[1]) == ARGV[1]`;
export const SCRIPTS = {
  // Claims KEYS[i] with the value ARGV[2i-1] for ARGV[2i] ms, for every i (one key, or a turn's many:
  // a key asked twice behaves as two calls). Answers, per key: the value found (the key was not
  // free), false (claimed), or 1 when a key of another type, not ours, was replaced.
  nestjsIdempotencyClaims: `
local out = {}
for i = 1, #KEYS do
  local key, claim, lease = KEYS[i], ARGV[2 * i - 1], ARGV[2 * i]
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then
    redis.call('DEL', key)
    redis.call('SET', key, claim, 'PX', lease)
    out[i] = 1
  elseif v then
    out[i] = v
  else
    redis.call('SET', key, claim, 'PX', lease)
    out[i] = false
  end
end
return out`,
  // Replaces a string value the codec could not read, unless it changed since (ARGV[1]: its SHA-1).
  nestjsIdempotencyTakeOver: `
local v = redis.call('GET', KEYS[1])
if v and redis.sha1hex(v) ~= ARGV[1] then return v end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return false`,
  // Commits ARGV[3i-1] to KEYS[i] for ARGV[3i] ms if it holds the claim of ARGV[3i-2], for every i.
  // A lapsed claim is gone from Redis (its PX): a missing key means nobody took it over since, so the
  // late owner's commit still lands; another claim or a record refuses it (0). A key of another type
  // answers its error for that key alone.
  nestjsIdempotencyCommits: `
local out = {}
for i = 1, #KEYS do
  local owner = ARGV[3 * i - 2]
  local v = redis.pcall('GET', KEYS[i])
  if type(v) == 'table' and v.err then
    out[i] = v
  elseif not v or string.sub(v, 1, #owner) == owner then
    redis.call('SET', KEYS[i], ARGV[3 * i - 1], 'PX', ARGV[3 * i])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out`,
  nestjsIdempotencyRelease: `${OWNS}
if owns then return redis.call('DEL', KEYS[1]) end
return 0`,
  nestjsIdempotencyRenew: `${OWNS}
if owns then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`,
  // For an operator: the value and its remaining ms in one read; a key of another type is not ours.
  nestjsIdempotencyPeek: `
local v = redis.pcall('GET', KEYS[1])
if not v or (type(v) == 'table' and v.err) then return false end
return {v, redis.call('PTTL', KEYS[1])}`,
  nestjsIdempotencyForget: `return redis.call('DEL', KEYS[1])`,
  // Touches no key: KEYS[1] only routes it (a Cluster answers from that key's master).
  nestjsIdempotencyPing: `return redis.call('PING')`,
} as const;

/** A claim for `nestjsIdempotencyClaims`: the key, its claim value, its lease. */
export interface ClaimItem {
  readonly key: string;
  readonly value: string;
  readonly leaseMs: number;
}

/** A commit for `nestjsIdempotencyCommits`: the key, its owner's prefix, the record, its TTL. */
export interface CommitItem {
  readonly key: string;
  readonly owner: string;
  readonly record: Buffer;
  readonly ttlMs: number;
}

/** The keys, then each claim's ARGV pair. */
export function claimsArgs(items: readonly ClaimItem[]): (string | number)[] {
  const args: (string | number)[] = items.map((item) => item.key);
  for (const item of items) args.push(item.value, item.leaseMs);
  return args;
}

/** The keys, then each commit's ARGV triple. */
export function commitsArgs(items: readonly CommitItem[]): (string | number | Buffer)[] {
  const args: (string | number | Buffer)[] = items.map((item) => item.key);
  for (const item of items) args.push(item.owner, item.record, item.ttlMs);
  return args;
}

/** The scripts called with their number of keys first (one, or a turn's many). */
export const MANY_KEYS: ReadonlySet<string> = new Set(['nestjsIdempotencyClaims', 'nestjsIdempotencyCommits']);

export interface ScriptedClient extends RedisClientLike {
  nestjsIdempotencyClaimsBuffer(keys: number, ...keysThenArgs: (string | number)[]): Promise<(Buffer | number | null)[]>;
  nestjsIdempotencyTakeOverBuffer(key: string, sha1: string, claim: string, leaseMs: number): Promise<Buffer | null>;
  nestjsIdempotencyCommits(keys: number, ...keysThenArgs: (string | number | Buffer)[]): Promise<(number | Error)[]>;
  nestjsIdempotencyRelease(key: string, owner: string): Promise<number>;
  nestjsIdempotencyRenew(key: string, owner: string, leaseMs: number): Promise<number>;
  nestjsIdempotencyPeekBuffer(key: string): Promise<[Buffer, number] | null>;
  nestjsIdempotencyForget(key: string): Promise<number>;
  nestjsIdempotencyPing(key: string): Promise<string>;
}
