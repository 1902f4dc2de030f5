import { DEFAULT_REDIS_COMMAND_TIMEOUT_MS, type RedisClientLike } from './redis-store.options.js';

/**
 * How `RedisStore` reached Redis before it took a plain options object (`RedisStoreOptions`). Immutable:
 * every `with…` returns a new instance. The store still takes one, and warns once.
 *
 * @deprecated Pass `{ url }` or `{ client }` (and `commandTimeoutMs`, `redisOptions`) to `RedisStore`.
 *
 * ```ts
 * new RedisStore(RedisCacheOptions.create().withUrl('redis://127.0.0.1:6379'));
 * new RedisStore(RedisCacheOptions.create().withClient(existingRedisOrCluster));
 * ```
 */
export class RedisCacheOptions {
  private constructor(
    /** `redis://` or `rediss://` URL of a client the store creates, owns and closes. */
    readonly url: string | undefined,
    /** A client the application owns: the store uses it and never closes it. */
    readonly client: RedisClientLike | undefined,
    /** Bound on each command, in ms. */
    readonly commandTimeoutMs: number,
    /** Extra ioredis options for the client created from {@link url}. */
    readonly redisOptions: Readonly<Record<string, unknown>>,
  ) {}

  static create(): RedisCacheOptions {
    return new RedisCacheOptions(undefined, undefined, DEFAULT_REDIS_COMMAND_TIMEOUT_MS, {});
  }

  /** Connect to this URL with a client of the store's own. */
  withUrl(url: string): RedisCacheOptions {
    return new RedisCacheOptions(url, undefined, this.commandTimeoutMs, this.redisOptions);
  }

  /** Use an existing ioredis `Redis` or `Cluster` client (standalone or cluster). */
  withClient(client: RedisClientLike): RedisCacheOptions {
    return new RedisCacheOptions(undefined, client, this.commandTimeoutMs, this.redisOptions);
  }

  /** Bound each command to `ms` (default 1000). */
  withCommandTimeout(ms: number): RedisCacheOptions {
    return new RedisCacheOptions(this.url, this.client, ms, this.redisOptions);
  }

  /** ioredis options for the client created by {@link withUrl} (TLS, auth, retry strategy, …). */
  withRedisOptions(options: Readonly<Record<string, unknown>>): RedisCacheOptions {
    return new RedisCacheOptions(this.url, this.client, this.commandTimeoutMs, options);
  }
}
