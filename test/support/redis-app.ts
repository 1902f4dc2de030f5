import { afterAll, beforeAll } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { IdempotencyModule, RedisStore } from '../../lib/index.js';
import { type AdapterName, startApp } from './app.js';
import { Gate, Runs, TestController } from './fixtures.js';
import { RedisServer } from './redis-server.js';

/** What {@link useRedisApp} provides once its `beforeAll` has run. */
export interface RedisApp {
  server: RedisServer;
  app: INestApplication;
  runs: Runs;
  gate: Gate;
  /** POST /payments with this key and a fixed body. */
  post(key: string): request.Test;
}

/**
 * For a describe: a redis-server of its own (so a test may stop or pause it) and a test app on a
 * `RedisStore` connected to it by URL, with `commandTimeoutMs` per command. Both are stopped after.
 */
export function useRedisApp(adapter: AdapterName, commandTimeoutMs: number): RedisApp {
  const ctx = {
    post: (key: string) => request(ctx.app.getHttpServer()).post('/payments').set('Idempotency-Key', key).send({ a: 1 }),
  } as RedisApp;
  beforeAll(async () => {
    ctx.server = await RedisServer.start([], { ownServer: true });
    ctx.app = await startApp(adapter, {
      imports: [
        IdempotencyModule.forRoot({
          store: new RedisStore({ url: ctx.server.url, commandTimeoutMs }),
        }),
      ],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    ctx.runs = ctx.app.get(Runs);
    ctx.gate = ctx.app.get(Gate);
  });
  afterAll(async () => {
    ctx.gate?.release();
    await ctx.app?.close();
    await ctx.server?.stop();
  });
  return ctx;
}
