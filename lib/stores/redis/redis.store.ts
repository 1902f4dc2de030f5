import { Logger } from '@nestjs/common';
import { createHash } from 'node:crypto';
import type { Writable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { LOGS, FAILURES } from '../../shared/messages/operator.messages.js';
import type {
  ClaimOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
  IdempotencyStore,
  OwnedKey,
  PeekedEntry,
} from '../contract/idempotency-store.interface.js';
import { decodeEntry, encodeClaim, encodeRecord, ownerPrefix } from '../shared/store-value.codec.js';
import type { RedisCacheOptions } from './redis-cache.options.js';
import { resolveRedisOptions } from './redis-options.resolver.js';
import type { RedisClientLike, RedisStoreOptions } from './redis-store.options.js';
import { openRedisClient } from './redis.connection.js';
import {
  type ClaimItem,
  claimsArgs,
  type CommitItem,
  commitsArgs,
  MANY_KEYS,
  SCRIPTS,
  type ScriptedClient,
} from './redis.scripts.js';
import { withTimeout } from '../../shared/utils/timeout.util.js';
import { RedisWakeups } from './redis.wakeups.js';
import { TurnBatch } from '../shared/turn.batch.js';

class RedisTimeoutError extends Error {}

/** The most claims, or commits, one command carries; a record over 64 KiB is committed alone. */
const MAX_CLAIMS = 64;
const MAX_COMMITS = 32;
const BATCHED_RECORD_BYTES = 64 * 1024;

/** An answer for one key, or the error Redis gave for that key. */
function only<T>(answers: readonly (T | Error)[]): T {
  const answer = answers[0];
  if (answer instanceof Error) throw answer;
  return answer;
}

/** Routes a Cluster's PING; never read or written. */
const PING_KEY = 'nestjs-idempotency:ping';

/**
 * An {@link IdempotencyStore} on Redis (ioredis 5.4+ or 6, standalone or Cluster), shared by every pod.
 * A first request costs two commands (claim, commit), a replay or a conflict one.
 */
export class RedisStore implements IdempotencyStore {
  private readonly logger = new Logger('RedisStore');
  private readonly client: Promise<ScriptedClient>;
  /** The client once connected: a command then does not wait a microtask for it. */
  private ready?: ScriptedClient;
  private readonly owned: boolean;
  private readonly timeoutMs: number;
  private corked = false;
  private readonly wakeups = new RedisWakeups(() => this.client);

  constructor(options: RedisStoreOptions | RedisCacheOptions) {
    const { url, client, commandTimeoutMs, redisOptions } = resolveRedisOptions(options);
    this.timeoutMs = commandTimeoutMs;
    this.owned = !client;
    this.client = client
      ? Promise.resolve(this.prepare(client))
      : openRedisClient(url, redisOptions, this.logger).then((own) => this.prepare(own));
    // A failed connect fails open() and every command; it must not be an unhandled rejection before.
    this.client.then((ready) => (this.ready = ready)).catch(() => undefined);
  }

  /**
   * Fails the start when ioredis is not installed. It does not wait for Redis: a server away at start
   * is answered as one away later (503 until it is back), so a pod can start before its Redis.
   */
  async open(): Promise<void> {
    await this.client;
  }

  /**
   * On the store's own client, the claims, and the commits, of one turn of the event loop go as one
   * command each (their socket write waited for the turn's end anyway): a command's client-side work
   * was most of what a replay cost over the in-memory store. Not on a client passed in: it may be a
   * Cluster, where one command cannot span keys of several slots.
   */
  private readonly claims = new TurnBatch<ClaimItem, Buffer | number | null>(MAX_CLAIMS, (items) => this.sendClaims(items));
  private readonly commits = new TurnBatch<CommitItem, number>(MAX_COMMITS, (items) => this.sendCommits(items));

  async claim(key: string, claim: IdempotencyClaim): Promise<ClaimOutcome> {
    try {
      return await this.claimOnce(key, claim);
    } catch (err) {
      // A script we gave up on still runs when Redis gets to it, and would hold the key for a lease
      // with no handler behind it (retries 409). Its release, sent after it on the same connection, runs
      // after it: fenced by the owner, it undoes that claim and nothing else.
      if (err instanceof RedisTimeoutError) this.release(key, claim.owner).catch(() => undefined);
      throw err;
    }
  }

  private async claimOnce(key: string, claim: IdempotencyClaim): Promise<ClaimOutcome> {
    const client = this.ready ?? (await this.client);
    const value = encodeClaim(claim.owner, claim.fingerprint);
    const item = { key, value, leaseMs: claim.leaseMs };
    const held = this.owned ? await this.claims.add(item) : only(await this.sendClaims([item], client));
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
    const now = await this.bounded(this.batched(client).nestjsIdempotencyTakeOverBuffer(key, sha1, value, claim.leaseMs));
    const after = now && decodeEntry(now);
    if (now && !after) throw new Error(FAILURES.redisForeign);
    return after ?? { state: 'claimed' };
  }

  async commit(key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean> {
    const item = { key, owner: ownerPrefix(owner), record: encodeRecord(record), ttlMs };
    const batched = this.owned && item.record.length <= BATCHED_RECORD_BYTES;
    return (batched ? await this.commits.add(item) : only(await this.sendCommits([item], this.ready))) === 1;
  }

  /** `client` when the command may join the turn's socket write (not from a batch's check phase). */
  private async sendClaims(items: readonly ClaimItem[], client?: ScriptedClient): Promise<(Buffer | number | null)[]> {
    const to = client ? this.batched(client) : await this.client;
    return this.bounded(to.nestjsIdempotencyClaimsBuffer(items.length, ...claimsArgs(items)));
  }

  private async sendCommits(items: readonly CommitItem[], client?: ScriptedClient): Promise<(number | Error)[]> {
    const to = client ? this.batched(client) : await this.client;
    return this.bounded(to.nestjsIdempotencyCommits(items.length, ...commitsArgs(items)));
  }

  async release(key: string, owner: string): Promise<boolean> {
    const client = await this.client;
    return (await this.bounded(this.batched(client).nestjsIdempotencyRelease(key, ownerPrefix(owner)))) === 1;
  }

  async renew(key: string, owner: string, leaseMs: number): Promise<boolean> {
    const client = await this.client;
    return (await this.bounded(this.batched(client).nestjsIdempotencyRenew(key, ownerPrefix(owner), leaseMs))) === 1;
  }

  /**
   * Every claim's script sent in the same turn, so they leave in one write (a pipeline) and their
   * answers come back together: one round trip per tick. Each is routed by its own key, so it works
   * on a Cluster too, where one script could not span keys of several slots.
   */
  async renewAll(claims: readonly OwnedKey[], leaseMs: number): Promise<boolean[]> {
    const client = this.batched(await this.client);
    const answers = await this.bounded(
      Promise.all(claims.map((c) => client.nestjsIdempotencyRenew(c.key, ownerPrefix(c.owner), leaseMs))),
    );
    return answers.map((n) => n === 1);
  }

  /** PING, bounded by `commandTimeoutMs`, through the scripts: the check also proves they load. */
  async ping(): Promise<void> {
    const client = await this.client;
    await this.bounded(client.nestjsIdempotencyPing(PING_KEY));
  }

  async peek(key: string): Promise<PeekedEntry | undefined> {
    const client = await this.client;
    const found = await this.bounded(client.nestjsIdempotencyPeekBuffer(key));
    const held = found && decodeEntry(found[0]);
    // PTTL is -1 for a key without expiry: none of ours, but a hand-written one may be.
    return held && held.state !== 'claimed' ? { ...held, expiresAt: found[1] < 0 ? Infinity : Date.now() + found[1] } : undefined;
  }

  async forget(key: string): Promise<boolean> {
    const client = await this.client;
    return (await this.bounded(client.nestjsIdempotencyForget(key))) === 1;
  }

  /** PUBLISH on one channel: every process's one subscriber hears it (`inFlight: 'wait'`). */
  announce(key: string): Promise<void> {
    return this.wakeups.announce(key);
  }

  listen(listener: (key: string) => void): Promise<void> {
    return this.wakeups.listen(listener);
  }

  private foreign(): void {
    this.logger.warn(LOGS.foreignValue);
  }

  /** Closes the client only when this store created it; its subscriber, if it opened one, always. */
  async close(): Promise<void> {
    await this.wakeups.close();
    if (!this.owned) return;
    const client = await this.client.catch(() => undefined);
    if (!client) return;
    // Claims and commits asked for in this turn leave at its end: they go before QUIT, not after it.
    await nextTurn();
    await client.quit().catch(() => client.disconnect());
  }

  private prepare(client: RedisClientLike): ScriptedClient {
    for (const [name, lua] of Object.entries(SCRIPTS))
      client.defineCommand(name, MANY_KEYS.has(name) ? { lua } : { numberOfKeys: 1, lua });
    return client as ScriptedClient;
  }

  /**
   * Every ioredis command is a socket write of its own: a write system call per command, which cost
   * a first request more than the rest of its Redis work. On the store's own client the socket is
   * corked until the event loop has run what is ready, so the commands of every request in that
   * turn leave in one write. Not on a client the application passed in: it may be a Cluster, and its
   * socket is not ours to hold.
   */
  private batched(client: ScriptedClient): ScriptedClient {
    if (this.corked || !this.owned) return client;
    const { stream, status } = client as unknown as { stream?: Writable; status?: string };
    if (!stream || status !== 'ready') return client;
    this.corked = true;
    stream.cork();
    setImmediate(() => {
      this.corked = false;
      stream.uncork();
    });
    return client;
  }

  private bounded<T>(command: Promise<T>): Promise<T> {
    return withTimeout(command, this.timeoutMs, () => new RedisTimeoutError(FAILURES.redisTimeout(this.timeoutMs)));
  }
}
