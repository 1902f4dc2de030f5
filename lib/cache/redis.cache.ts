import { Logger } from '@nestjs/common';
import { FOREIGN_VALUE } from '../idempotency.messages.js';
import { createHash } from 'node:crypto';
import type { ClaimOutcome, IdempotencyClaim, IdempotencyRecord, IdempotencyStore } from './idempotency-store.interface.js';
import { MAX_TIMER_MS } from '../idempotency.constants.js';
import { decodeEntry, encodeClaim, encodeRecord, ownerPrefix } from './record-codec.js';
import { RedisCacheOptions, type RedisClientLike } from './redis-cache.options.js';

// One script per operation, each a single round trip on a single key (so a Cluster routes it by
// that key). ioredis sends them with EVALSHA, falling back to EVAL once per script on NOSCRIPT.
// Commit, release and renew act only while the key holds the caller's claim: the stored value must
// start with "C<owner>\n" (ARGV[1]); the owner is a random token without newlines. That is the fencing.
const OWNS = `local v = redis.call('GET', KEYS[1])
local owns = v and string.sub(v, 1, #ARGV[1]) == ARGV[1]`;
const SCRIPTS = {
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
  nestjsIdempotencyCommit: `${OWNS}
if owns then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 end
return 0`,
  nestjsIdempotencyRelease: `${OWNS}
if owns then return redis.call('DEL', KEYS[1]) end
return 0`,
  nestjsIdempotencyRenew: `${OWNS}
if owns then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`,
} as const;

interface ScriptedClient extends RedisClientLike {
  nestjsIdempotencyClaimBuffer(key: string, claim: string, leaseMs: number): Promise<Buffer | number | null>;
  nestjsIdempotencyTakeOverBuffer(key: string, sha1: string, claim: string, leaseMs: number): Promise<Buffer | null>;
  nestjsIdempotencyCommit(key: string, owner: string, record: Buffer, ttlMs: number): Promise<number>;
  nestjsIdempotencyRelease(key: string, owner: string): Promise<number>;
  nestjsIdempotencyRenew(key: string, owner: string, leaseMs: number): Promise<number>;
}

class RedisTimeoutError extends Error {}

/**
 * An {@link IdempotencyStore} on Redis (ioredis 6, standalone or Cluster), shared by every pod.
 * A first request costs two commands (claim, commit), a replay or a conflict one.
 */
export class RedisCache implements IdempotencyStore {
  private readonly logger = new Logger('RedisCache');
  private readonly client: Promise<ScriptedClient>;
  private readonly owned: boolean;
  private readonly timeoutMs: number;

  constructor(options: RedisCacheOptions) {
    if (!(options instanceof RedisCacheOptions)) throw new Error('RedisCache: pass RedisCacheOptions.create().withUrl(...) or .withClient(...)');
    const { url, client, commandTimeoutMs } = options;
    if (!url && !client) throw new Error('RedisCache: set withUrl() or withClient()');
    if (!Number.isSafeInteger(commandTimeoutMs) || commandTimeoutMs < 1 || commandTimeoutMs > MAX_TIMER_MS) {
      throw new Error(
        `RedisCache: the command timeout must be an integer from 1 to ${MAX_TIMER_MS} (ms), got ${String(commandTimeoutMs)}`,
      );
    }
    this.timeoutMs = commandTimeoutMs;
    this.owned = !client;
    this.client = client ? Promise.resolve(this.prepare(client)) : this.connect(url!, options.redisOptions);
    // A failed connect surfaces on the first command; don't let it be an unhandled rejection before.
    this.client.catch(() => undefined);
  }

  async claim(key: string, claim: IdempotencyClaim): Promise<ClaimOutcome> {
    const client = await this.client;
    const value = encodeClaim(claim.owner, claim.fingerprint);
    const held = await this.bounded(client.nestjsIdempotencyClaimBuffer(key, value, claim.leaseMs));
    if (held === null) return { state: 'claimed' };
    if (typeof held === 'number') {
      this.foreign();
      return { state: 'claimed' };
    }
    const outcome = decodeEntry(held);
    if (outcome) return outcome;
    // A value our codec cannot read: nothing of ours is there, so the key is free. Replaced only if
    // unchanged, in one more round trip that only such a key costs.
    this.foreign();
    const sha1 = createHash('sha1').update(held).digest('hex');
    const now = await this.bounded(client.nestjsIdempotencyTakeOverBuffer(key, sha1, value, claim.leaseMs));
    const after = now && decodeEntry(now);
    if (now && !after) throw new Error('RedisCache: the key holds a value that is not an idempotency record');
    return after ?? { state: 'claimed' };
  }

  async commit(key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean> {
    const client = await this.client;
    return (await this.bounded(client.nestjsIdempotencyCommit(key, ownerPrefix(owner), encodeRecord(record), ttlMs))) === 1;
  }

  async release(key: string, owner: string): Promise<boolean> {
    const client = await this.client;
    return (await this.bounded(client.nestjsIdempotencyRelease(key, ownerPrefix(owner)))) === 1;
  }

  async renew(key: string, owner: string, leaseMs: number): Promise<boolean> {
    const client = await this.client;
    return (await this.bounded(client.nestjsIdempotencyRenew(key, ownerPrefix(owner), leaseMs))) === 1;
  }

  private foreign(): void {
    this.logger.warn(FOREIGN_VALUE);
  }

  /** Closes the client only when this store created it. */
  async close(): Promise<void> {
    if (!this.owned) return;
    const client = await this.client.catch(() => undefined);
    if (!client) return;
    await client.quit().catch(() => client.disconnect());
  }

  private prepare(client: RedisClientLike): ScriptedClient {
    for (const [name, lua] of Object.entries(SCRIPTS)) client.defineCommand(name, { numberOfKeys: 1, lua });
    return client as ScriptedClient;
  }

  private async connect(url: string, redisOptions: Readonly<Record<string, unknown>>): Promise<ScriptedClient> {
    // Loaded here, not at import: the in-memory path must run without ioredis installed.
    const ioredis = (await import('ioredis')) as unknown as { Redis: new (url: string, options: object) => RedisClientLike };
    const client = new ioredis.Redis(url, {
      // Commands wait at most one reconnect attempt while Redis is away, then fail (503 upstream)
      // instead of queueing and running late.
      maxRetriesPerRequest: 1,
      retryStrategy: (times: number) => Math.min(times * 100, 1000),
      ...redisOptions,
    });
    let down = false;
    client.on('error', (err: Error) => {
      if (down) return;
      down = true;
      this.logger.error(`Redis unreachable: ${err.message}`);
    });
    client.on('ready', () => {
      if (down) this.logger.log('Redis reachable again');
      down = false;
    });
    return this.prepare(client);
  }

  private bounded<T>(command: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new RedisTimeoutError(`Redis command timed out after ${this.timeoutMs} ms`)), this.timeoutMs);
      timer.unref();
    });
    return Promise.race([command, timeout]).finally(() => clearTimeout(timer));
  }
}
