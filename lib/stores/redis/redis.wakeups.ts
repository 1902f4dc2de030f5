import type { RedisClientLike } from './redis-store.options.js';

/** The channel every `RedisStore` announces settled keys on; a key carries its `keyPrefix`, so apps sharing a Redis tell theirs apart. */
export const SETTLED_CHANNEL = 'nestjs-idempotency:settled';

/** What a subscriber connection (an ioredis `duplicate()`) is used for here. */
interface Subscriber extends RedisClientLike {
  subscribe(channel: string): Promise<unknown>;
}

/**
 * Wake-ups of waiting duplicates across processes on Redis pub/sub: one subscriber connection per
 * store (a duplicate of its client, so TLS, auth and Cluster nodes are the same), opened when a
 * duplicate first waits. ioredis subscribes again by itself after a reconnect. What was announced
 * meanwhile is found by the waiters' next look, about a lease later: a reconnect is often a Redis
 * that restarted, and one that kept nothing would hand a waiter that looked at once the key of a run
 * still going (PostgreSQL, whose LISTEN connection can drop while its data stays, wakes every waiter).
 */
export class RedisWakeups {
  private subscriber: Subscriber | undefined;

  constructor(private readonly client: () => Promise<RedisClientLike>) {}

  async announce(key: string): Promise<void> {
    const client = await this.client();
    await client.publish!(SETTLED_CHANNEL, key);
  }

  async listen(listener: (key: string) => void): Promise<void> {
    const client = await this.client();
    const subscriber = (this.subscriber = client.duplicate!() as Subscriber);
    // Its outages are the store client's too, which logs them; unheard, ioredis would print each one.
    subscriber.on('error', () => undefined);
    // Subscribed to one channel only: every message is a settled key.
    subscriber.on('message', (_channel: string, key: string) => listener(key));
    try {
      await subscriber.subscribe(SETTLED_CHANNEL);
    } catch (err) {
      this.subscriber = undefined;
      subscriber.disconnect();
      throw err;
    }
  }

  /** Closes the subscriber connection, which is always the store's own. */
  async close(): Promise<void> {
    const subscriber = this.subscriber;
    this.subscriber = undefined;
    await subscriber?.quit().catch(() => subscriber.disconnect());
  }
}
