import type { Logger } from '@nestjs/common';
import { LOGS } from '../../shared/messages/operator.messages.js';
import { importRequired } from '../../shared/utils/optional-peer.util.js';
import type { RedisClientLike } from './redis-store.options.js';

/**
 * The client a `RedisStore` made from a `url` opens for itself: ioredis loaded on first use (the
 * in-memory path must run without it installed), commands that fail after one reconnect attempt
 * instead of queueing, and one log line when Redis goes away and one when it is back.
 */
export async function openRedisClient(
  url: string,
  redisOptions: Readonly<Record<string, unknown>>,
  logger: Logger,
): Promise<RedisClientLike> {
  const ioredis = (await importRequired('RedisStore', 'ioredis', 5, () => import('ioredis'))) as unknown as {
    Redis: new (url: string, options: object) => RedisClientLike;
  };
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
    logger.error(LOGS.redisDown(err.message));
  });
  client.on('ready', () => {
    if (down) logger.log(LOGS.redisUp);
    down = false;
  });
  return client;
}
