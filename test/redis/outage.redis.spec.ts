import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { Cluster } from 'ioredis';
import request from 'supertest';
import { IdempotencyModule, RedisCache, RedisCacheOptions } from '../../lib/index.js';
import { ADAPTERS, startApp } from '../support/app.js';
import { Gate, Runs, TestController } from '../support/fixtures.js';
import { RedisCluster, RedisServer, clusterAvailable, redisAvailable } from '../support/redis-server.js';
import { sleep } from '../support/timing.js';

const describeRedis = redisAvailable('Redis outage suite') ? describe : describe.skip;
const describeCluster = clusterAvailable('Redis Cluster e2e suite') ? describe : describe.skip;

describeRedis.each(ADAPTERS)('Redis outage on %s', (adapter) => {
  let server: RedisServer;
  let app: INestApplication;
  let runs: Runs;
  let gate: Gate;
  beforeAll(async () => {
    server = await RedisServer.start([], { ownServer: true });
    app = await startApp(adapter, {
      imports: [
        IdempotencyModule.forRoot({
          cache: new RedisCache(RedisCacheOptions.create().withUrl(server.url).withCommandTimeout(500)),
        }),
      ],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    runs = app.get(Runs);
    gate = app.get(Gate);
  });
  afterAll(async () => {
    gate?.release();
    await app?.close();
    await server?.stop();
  });

  const post = (key: string) => request(app.getHttpServer()).post('/payments').set('Idempotency-Key', key).send({ a: 1 });

  it('works, then fails closed with 503 while Redis is down, then works again without a restart', async () => {
    expect((await post('before')).status).toBe(201);
    await server.stop();
    const before = runs.total();
    const down = await post('during');
    expect(down.status).toBe(503);
    expect(down.headers['retry-after']).toBe('1');
    expect(down.body).toEqual({ error: 'idempotency store unavailable; retry shortly' });
    expect(runs.total()).toBe(before);

    await server.resume();
    let back = await post('after');
    for (let i = 0; i < 50 && back.status === 503; i++) {
      await sleep(100);
      back = await post('after');
    }
    expect(back.status).toBe(201);
    expect((await post('after')).headers['idempotent-replayed']).toBe('true');
  }, 30_000);

  it("a commit that fails after the handler ran still sends the handler's response", async () => {
    gate.close();
    const entered = gate.whenEntered();
    const pending = post('commit-fails').then((r) => r);
    await entered;
    await server.stop();
    gate.release();
    const res = await pending;
    expect(res.status).toBe(201);
    expect(res.body.txId).toMatch(/^tx-\d+$/);
    await server.resume();
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
      imports: [IdempotencyModule.forRoot({ cache: new RedisCache(RedisCacheOptions.create().withClient(client)) })],
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
