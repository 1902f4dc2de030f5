import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { type INestApplication, Logger } from '@nestjs/common';
import request from 'supertest';
import { IdempotencyModule, RedisCache, RedisCacheOptions } from '../../lib/index.js';
import { ADAPTERS, startApp } from '../support/app.js';
import { Gate, Runs, TestController } from '../support/fixtures.js';
import { RedisServer, redisAvailable } from '../support/redis-server.js';
import { sleep } from '../support/timing.js';

// Issue 8, the two Redis items, against a real redis-server on both adapters.
const describeRedis = redisAvailable('Redis hardening suite') ? describe : describe.skip;

describeRedis.each(ADAPTERS)('issue 8 on Redis, %s', (adapter) => {
  let server: RedisServer;
  let app: INestApplication;
  let runs: Runs;
  beforeAll(async () => {
    server = await RedisServer.start([], { ownServer: true });
    app = await startApp(adapter, {
      imports: [
        IdempotencyModule.forRoot({
          cache: new RedisCache(RedisCacheOptions.create().withUrl(server.url).withCommandTimeout(300)),
        }),
      ],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    runs = app.get(Runs);
  });
  afterAll(async () => {
    await app?.close();
    await server?.stop();
  });
  const post = (key: string) => request(app.getHttpServer()).post('/payments').set('Idempotency-Key', key).send({ a: 1 });

  it('5. a claim that timed out and lands later is released as soon as Redis answers: the retry runs at once', async () => {
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    await post('warm-up');
    server.cli('CLIENT', 'PAUSE', '800', 'ALL');
    const paused = Date.now();
    const first = await post('paused');
    expect(first.status).toBe(503);
    expect(runs.of('payments')).toBe(1);
    await sleep(Math.max(0, paused + 1000 - Date.now())); // Redis has answered: the late claim landed, then its release
    const retry = await post('paused');
    expect(retry.status).toBe(201);
    expect(runs.of('payments')).toBe(2);
    expect((await post('paused')).headers['idempotent-replayed']).toBe('true');
    expect(errors).toHaveBeenCalledWith(expect.stringContaining('TestController.create: claim failed, answering 503'));
    errors.mockRestore();
  });

  it.each([
    ['a malformed record', ['SET', 'Rnot a record']],
    ['a value of another application', ['SET', 'hello']],
    ['a claim without an owner', ['SET', 'C']],
    ['a hash', ['HSET', 'field', 'value']],
    ['a list', ['RPUSH', 'item']],
  ])('11. %s under our prefix is logged and taken over, never a permanent 503', async (_name, [command, ...args]) => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const key = `foreign-${command}-${args[0].length}`;
    server.cli(command, `idem:%:${key}`, ...args);
    const before = runs.of('payments');
    const first = await post(key);
    expect(first.status).toBe(201);
    expect(runs.of('payments')).toBe(before + 1);
    const retry = await post(key);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.text).toBe(first.text);
    expect(runs.of('payments')).toBe(before + 1);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn).toHaveBeenCalledWith(
      'a value the idempotency layer did not write was under an idempotency key; it is replaced by a claim',
    );
    warn.mockRestore();
  });
});
