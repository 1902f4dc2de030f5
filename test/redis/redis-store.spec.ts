import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Cluster, Redis } from 'ioredis';
import { RedisCache, RedisCacheOptions } from '../../lib/index.js';
import { RedisCluster, RedisServer, clusterAvailable, redisAvailable } from '../support/redis-server.js';
import { sampleRecord, storeContract } from '../support/store-contract.js';

const describeRedis = redisAvailable('RedisCache store suite') ? describe : describe.skip;
const describeCluster = clusterAvailable('RedisCache cluster suite') ? describe : describe.skip;

describeRedis('RedisCache on a standalone redis-server', () => {
  let server: RedisServer;
  let cache: RedisCache;
  beforeAll(async () => {
    server = await RedisServer.start();
  });
  afterAll(async () => {
    await cache?.close();
    await server?.stop();
  });

  storeContract('RedisCache (URL client)', async () => {
    cache = new RedisCache(RedisCacheOptions.create().withUrl(server.url));
    return cache;
  });

  it('keeps a record for ttlMs to the millisecond (PX, not seconds)', async () => {
    await cache.claim('idem:px', { owner: 'o', fingerprint: 'f', leaseMs: 1234 });
    const lease = Number(server.cli('PTTL', 'idem:px'));
    expect(lease).toBeGreaterThan(1000);
    expect(lease).toBeLessThanOrEqual(1234);
    await cache.commit('idem:px', 'o', sampleRecord('f'), 2500);
    const ttl = Number(server.cli('PTTL', 'idem:px'));
    expect(ttl).toBeGreaterThan(2300);
    expect(ttl).toBeLessThanOrEqual(2500);
  });

  it('uses one EVALSHA per operation: claim, replay and conflict cost one command each', async () => {
    // Warm the script cache: the first call of each script falls back to EVAL once.
    await cache.claim('idem:warm', { owner: 'w', fingerprint: 'f', leaseMs: 1000 });
    await cache.commit('idem:warm', 'w', sampleRecord('f'), 1000);
    server.cli('CONFIG', 'RESETSTAT');
    await cache.claim('idem:count', { owner: 'a', fingerprint: 'f', leaseMs: 1000 });
    await cache.commit('idem:count', 'a', sampleRecord('f'), 1000);
    expect(server.commandStats().evalsha).toBe(2);
    server.cli('CONFIG', 'RESETSTAT');
    await cache.claim('idem:count', { owner: 'b', fingerprint: 'f', leaseMs: 1000 });
    expect(server.commandStats().evalsha).toBe(1);
    const stats = server.commandStats();
    expect(Object.keys(stats).filter((c) => !['evalsha', 'get', 'set', 'config|resetstat', 'info'].includes(c))).toEqual([]);
  });

  it('closes only the clients it created', async () => {
    const own = new Redis(server.url);
    const shared = new RedisCache(RedisCacheOptions.create().withClient(own));
    await shared.claim('idem:shared', { owner: 'o', fingerprint: 'f', leaseMs: 1000 });
    await shared.close();
    expect(await own.ping()).toBe('PONG');
    own.disconnect();
    const created = new RedisCache(RedisCacheOptions.create().withUrl(server.url));
    await created.claim('idem:created', { owner: 'o', fingerprint: 'f', leaseMs: 1000 });
    const clientsBefore = Number(/connected_clients:(\d+)/.exec(server.cli('INFO', 'clients'))![1]);
    await created.close();
    await new Promise((r) => setTimeout(r, 100));
    const clientsAfter = Number(/connected_clients:(\d+)/.exec(server.cli('INFO', 'clients'))![1]);
    expect(clientsAfter).toBe(clientsBefore - 1);
  });

  it('validates its options', () => {
    expect(() => new RedisCache(RedisCacheOptions.create())).toThrow('set withUrl() or withClient()');
    expect(() => new RedisCache(RedisCacheOptions.create().withUrl(server.url).withCommandTimeout(0))).toThrow('command timeout');
  });
});

describeRedis('RedisCache with an existing client', () => {
  let server: RedisServer;
  let client: Redis;
  beforeAll(async () => {
    server = await RedisServer.start();
  });
  afterAll(async () => {
    client?.disconnect();
    await server?.stop();
  });
  storeContract('RedisCache (withClient)', async () => {
    client = new Redis(server.url);
    return new RedisCache(RedisCacheOptions.create().withClient(client));
  });
});

describeCluster('RedisCache on a 3-master Redis Cluster', () => {
  let cluster: RedisCluster;
  let client: Cluster;
  beforeAll(async () => {
    cluster = await RedisCluster.start();
  }, 60_000);
  afterAll(async () => {
    client?.disconnect();
    await cluster?.stop();
  });
  storeContract('RedisCache (Cluster client)', async () => {
    client = new Cluster(cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })));
    return new RedisCache(RedisCacheOptions.create().withClient(client));
  });

  it('spreads keys over the masters', async () => {
    const cache = new RedisCache(RedisCacheOptions.create().withClient(client));
    for (let i = 0; i < 30; i++) await cache.claim(`idem:spread:${i}`, { owner: 'o', fingerprint: 'f', leaseMs: 5000 });
    const perNode = cluster.nodes.map((n) => Number(n.cli('DBSIZE').trim()));
    expect(perNode.filter((n) => n > 0).length).toBe(3);
  });
});
