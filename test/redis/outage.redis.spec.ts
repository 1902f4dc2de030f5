import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { Cluster } from 'ioredis';
import request from 'supertest';
import { IdempotencyModule, RedisStore } from '../../lib/index.js';
import { ADAPTERS, startApp } from '../support/app.js';
import { Gate, Runs, TestController } from '../support/fixtures.js';
import { RedisCluster, clusterAvailable, redisAvailable } from '../support/redis-server.js';
import { useRedisApp } from '../support/redis-app.js';
import { sleep } from '../support/timing.js';

const describeRedis = redisAvailable('Redis outage suite') ? describe : describe.skip;
const describeCluster = clusterAvailable('Redis Cluster e2e suite') ? describe : describe.skip;

describeRedis.each(ADAPTERS)('Redis outage on %s', (adapter) => {
  const redis = useRedisApp(adapter, 500);

  it('works, then fails closed with 503 while Redis is down, then works again without a restart', async () => {
    expect((await redis.post('before')).status).toBe(201);
    await redis.server.stop();
    const before = redis.runs.total();
    const down = await redis.post('during');
    expect(down.status).toBe(503);
    expect(down.headers['retry-after']).toBe('1');
    expect(down.body).toEqual({ error: 'idempotency store unavailable; retry shortly' });
    expect(redis.runs.total()).toBe(before);

    await redis.server.resume();
    let back = await redis.post('after');
    for (let i = 0; i < 50 && back.status === 503; i++) {
      await sleep(100);
      back = await redis.post('after');
    }
    expect(back.status).toBe(201);
    expect((await redis.post('after')).headers['idempotent-replayed']).toBe('true');
  }, 30_000);

  it("a commit that fails after the handler ran still sends the handler's response", async () => {
    redis.gate.close();
    const entered = redis.gate.whenEntered();
    const pending = redis.post('commit-fails').then((r) => r);
    await entered;
    await redis.server.stop();
    redis.gate.release();
    const res = await pending;
    expect(res.status).toBe(201);
    expect(res.body.txId).toMatch(/^tx-\d+$/);
    await redis.server.resume();
  }, 30_000);
});

describeCluster('an e2e replay through a Redis Cluster client', () => {
  let cluster: RedisCluster;
  let client: Cluster;
  let app: INestApplication;
  beforeAll(async () => {
    cluster = await RedisCluster.start();
    client = new Cluster(cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })));
    app = await startApp('express', {
      imports: [IdempotencyModule.forRoot({ store: new RedisStore({ client }) })],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    client?.disconnect();
    await cluster?.stop();
  });

  it('replays byte for byte and runs the handler once', async () => {
    for (const key of ['c-1', 'c-2', 'c-3', 'c-4']) {
      const a = await request(app.getHttpServer()).post('/payments').set('Idempotency-Key', key).send({ n: key });
      const b = await request(app.getHttpServer()).post('/payments').set('Idempotency-Key', key).send({ n: key });
      expect(a.status).toBe(201);
      expect(b.text).toBe(a.text);
      expect(b.headers['idempotent-replayed']).toBe('true');
    }
    expect(app.get(Runs).of('payments')).toBe(4);
  });
});
