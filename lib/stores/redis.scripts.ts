import type { RedisClientLike } from './redis-store.options.js';

// One script per operation, each a single round trip on a single key (so a Cluster routes it by
// that key). The client sends them with EVALSHA, falling back to EVAL once per script on NOSCRIPT.
// Commit, release and renew act only while the key holds the caller's claim (commit also on a missing
// key, below): the stored value must start with "C<owner>\n" (ARGV[1]); the owner is a random token
// without newlines. That is the fencing.
const OWNS = `local v = redis.call('GET', KEYS[1])
local owns = v and string.sub(v, 1, #ARGV[1]) == ARGV[1]`;
export const SCRIPTS = {
  // A key of another type (a hash under our prefix) is not ours: it is replaced, and 1 reports it.
  nestjsIdempotencyClaim: `
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and v.err then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if v then return v end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false`,
  // Replaces a string value the codec could not read, unless it changed since (ARGV[1]: its SHA-1).
  nestjsIdempotencyTakeOver: `
local v = redis.call('GET', KEYS[1])
if v and redis.sha1hex(v) ~= ARGV[1] then return v end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return false`,
  // A lapsed claim is gone from Redis (its PX): a missing key means nobody took it over since, so
  // the late owner's commit still lands; another claim or a record refuses it.
  nestjsIdempotencyCommit: `${OWNS}
if owns or not v then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 end
return 0`,
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

export interface ScriptedClient extends RedisClientLike {
  nestjsIdempotencyClaimBuffer(key: string, claim: string, leaseMs: number): Promise<Buffer | number | null>;
  nestjsIdempotencyTakeOverBuffer(key: string, sha1: string, claim: string, leaseMs: number): Promise<Buffer | null>;
  nestjsIdempotencyCommit(key: string, owner: string, record: Buffer, ttlMs: number): Promise<number>;
  nestjsIdempotencyRelease(key: string, owner: string): Promise<number>;
  nestjsIdempotencyRenew(key: string, owner: string, leaseMs: number): Promise<number>;
  nestjsIdempotencyPeekBuffer(key: string): Promise<[Buffer, number] | null>;
  nestjsIdempotencyForget(key: string): Promise<number>;
  nestjsIdempotencyPing(key: string): Promise<string>;
}
