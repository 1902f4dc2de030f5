import { describe, expect, it } from '@jest/globals';
import { RedisCacheOptions } from '../../lib/compat/index.js';
import type { RedisClientLike } from '../../lib/stores/redis/redis-store.options.js';

const client = { marker: 'client' } as unknown as RedisClientLike;

describe('RedisCacheOptions', () => {
  it('starts with no target, a 1 s command bound and no ioredis options', () => {
    const o = RedisCacheOptions.create();
    expect({ ...o }).toEqual({ url: undefined, client: undefined, commandTimeoutMs: 1000, redisOptions: {} });
  });

  it('is immutable: each with…() returns a new instance and keeps the other settings', () => {
    const base = RedisCacheOptions.create();
    const timed = base.withCommandTimeout(250);
    expect(timed).not.toBe(base);
    expect(base.commandTimeoutMs).toBe(1000);
    const withOptions = timed.withRedisOptions({ db: 2 });
    expect({ ...withOptions }).toEqual({ url: undefined, client: undefined, commandTimeoutMs: 250, redisOptions: { db: 2 } });
    expect(timed.redisOptions).toEqual({});
    const url = withOptions.withUrl('redis://127.0.0.1:1');
    expect({ ...url }).toEqual({ url: 'redis://127.0.0.1:1', client: undefined, commandTimeoutMs: 250, redisOptions: { db: 2 } });
    expect(withOptions.url).toBeUndefined();
    const withClient = url.withClient(client);
    expect({ ...withClient }).toEqual({ url: undefined, client, commandTimeoutMs: 250, redisOptions: { db: 2 } });
    const back = withClient.withUrl('redis://127.0.0.1:2');
    expect(back.client).toBeUndefined();
    expect({ ...withClient.withCommandTimeout(9) }).toEqual({
      url: undefined,
      client,
      commandTimeoutMs: 9,
      redisOptions: { db: 2 },
    });
    expect(url.withCommandTimeout(9).url).toBe('redis://127.0.0.1:1');
    expect(withClient.withRedisOptions({ db: 3 }).client).toBe(client);
    expect(url.withRedisOptions({ db: 3 }).url).toBe('redis://127.0.0.1:1');
  });
});
