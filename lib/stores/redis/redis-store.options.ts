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
  /** For `inFlight: 'wait'`: announces a settled key. */
  publish?(channel: string, message: string): Promise<unknown>;
  /** For `inFlight: 'wait'`: a connection of the same kind and options, to subscribe on. */
  duplicate?(): RedisClientLike;
}

/** Default bound on one Redis command, in ms: past it the request is answered 503. */
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 1000;

/**
 * Options of `RedisStore`: a URL (a client of the store's own) or the application's client.
 *
 * ```ts
 * new RedisStore({ url: 'redis://127.0.0.1:6379' });
 * new RedisStore({ client: existingRedisOrCluster, commandTimeoutMs: 500 });
 * ```
 */
export interface RedisStoreOptions {
  /** `redis://` or `rediss://` URL of a client the store creates, owns and closes. */
  url?: string;
  /** An ioredis `Redis` or `Cluster` client the application owns: the store uses it and never closes it. */
  client?: RedisClientLike;
  /** Bound on each command, in ms; past it the request is answered 503. Default 1000. */
  commandTimeoutMs?: number;
  /** ioredis options for the client created from {@link url} (TLS, auth, retry strategy, …). */
  redisOptions?: Readonly<Record<string, unknown>>;
}
