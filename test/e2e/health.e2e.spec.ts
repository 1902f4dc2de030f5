import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get, type INestApplication } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import request from 'supertest';
import {
  IdempotencyHealthIndicator,
  IdempotencyModule,
  type IdempotencyStore,
  InMemoryStore,
  RedisStore,
} from '../../lib/index.js';
import { ADAPTERS, startApp, useApps } from '../support/app.js';
import { spyOnLogger } from '../support/logger.js';
import { RedisServer, redisAvailable } from '../support/redis-server.js';
import { openStore, storeNames } from '../support/stores.js';

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly idempotency: IdempotencyHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.idempotency.isHealthy('idempotency', { timeoutMs: 300 })]);
  }
}

const withHealth = (cache: IdempotencyStore) => ({
  imports: [TerminusModule.forRoot({ logger: false }), IdempotencyModule.forRoot({ store: cache })],
  controllers: [HealthController],
});
const app = (adapter: (typeof ADAPTERS)[number], cache: IdempotencyStore) => startApp(adapter, withHealth(cache));

/** Real stores whose ping a test can make fail or hang, as a store that is down or slow. */
class FailingCache extends InMemoryStore {
  override ping(): Promise<void> {
    return Promise.reject(new Error('store down (by the test)'));
  }
}
class HangingCache extends InMemoryStore {
  override ping(): Promise<void> {
    return new Promise(() => undefined);
  }
}

const cases = storeNames('IdempotencyHealthIndicator e2e').flatMap((store) =>
  ADAPTERS.map((adapter) => [store, adapter] as const),
);

describe.each(cases)('IdempotencyHealthIndicator with Terminus on %s, %s', (storeName, adapter) => {
  const start = useApps();
  spyOnLogger();

  it('is up with the store name and its latency', async () => {
    const { cache } = await openStore(storeName);
    const res = await request((await start(adapter, withHealth(cache))).getHttpServer()).get('/health');
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('ok');
    expect(res.body.info.idempotency).toEqual({ status: 'up', store: cache.constructor.name, latencyMs: expect.any(Number) });
  });
});

describe.each(ADAPTERS)('IdempotencyHealthIndicator down on %s', (adapter) => {
  spyOnLogger();
  const apps: INestApplication[] = [];
  afterAll(() => Promise.all(apps.map((a) => a.close())));

  it('is down with the store error sentence (503) when the ping fails, and when it does not answer in time', async () => {
    for (const [cache, message] of [
      [new FailingCache(), 'store down (by the test)'],
      [new HangingCache(), 'the idempotency store did not answer within 300 ms'],
    ] as const) {
      const a = await app(adapter, cache);
      apps.push(a);
      const res = await request(a.getHttpServer()).get('/health');
      expect(res.status).toBe(503);
      expect(res.body.error.idempotency).toEqual({ status: 'down', store: cache.constructor.name, message });
    }
  });
});

const describeRedis = redisAvailable('IdempotencyHealthIndicator on Redis') ? describe : describe.skip;
describeRedis.each(ADAPTERS)('IdempotencyHealthIndicator on a real Redis, %s', (adapter) => {
  spyOnLogger();
  let server: RedisServer;
  let nest: INestApplication;
  beforeAll(async () => {
    server = await RedisServer.start([], { ownServer: true });
    nest = await app(adapter, new RedisStore({ url: server.url, commandTimeoutMs: 200 }));
  });
  afterAll(async () => {
    await nest?.close();
    await server?.stop();
  });

  it('is up while redis-server answers, down once it is stopped', async () => {
    const up = await request(nest.getHttpServer()).get('/health');
    expect(up.body.info.idempotency).toMatchObject({ status: 'up', store: 'RedisStore' });
    await server.stop();
    const down = await request(nest.getHttpServer()).get('/health');
    expect(down.status).toBe(503);
    expect(down.body.error.idempotency).toMatchObject({ status: 'down', store: 'RedisStore', message: expect.any(String) });
  });
});
