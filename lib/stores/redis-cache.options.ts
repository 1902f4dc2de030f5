/**
 * The parts of an ioredis client (`Redis` or `Cluster`) the store uses. Declared here so that the
 * package's types never name ioredis, which is an optional peer dependency.
 */
export interface RedisClientLike {
  defineCommand(name: string, definition: { numberOfKeys?: number; lua: string }): void;
  quit(): Promise<unknown>;
  disconnect(): void;
  // `any`, as ioredis declares it: anything narrower would refuse real `Redis` and `Cluster` clients.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  on(event: string, listener: (...args: any[]) => void): unknown;
}

/** Default bound on one Redis command, in ms: past it the request is answered 503. */
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 1000;

/**
 * How `RedisCache` reaches Redis. Immutable: every `with…` returns a new instance.
 *
 * ```ts
 * new RedisCache(RedisCacheOptions.create().withUrl('redis://127.0.0.1:6379'));
 * new RedisCache(RedisCacheOptions.create().withClient(existingRedisOrCluster));
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
