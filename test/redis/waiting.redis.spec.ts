import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { RedisStore } from '../../lib/index.js';
import { RedisServer, redisAvailable } from '../support/redis-server.js';
import { until } from '../support/timing.js';
import {
  manyWaiters,
  post,
  waitThroughRestart,
  startWaitPod,
  type WaitPod,
  waitingScenarios,
  waitKey,
} from '../support/waiting.js';

const describeRedis = redisAvailable('waiting duplicates on Redis') ? describe : describe.skip;

// Two applications (pods) on one redis-server: the duplicate waits on the second, the first request
// runs on the first, and the wake-up travels through Redis pub/sub.
describeRedis("inFlight: 'wait' across two pods on RedisStore", () => {
  let server: RedisServer;
  let first: WaitPod;
  let second: WaitPod;
  const named = (name: string) => new RedisStore({ url: server.url, redisOptions: { connectionName: name } });
  /** The connections of the pod whose store is named `name` (its subscriber is a duplicate: the same name). */
  const connections = (name: string) =>
    server
      .cli('CLIENT', 'LIST')
      .split('\n')
      .filter((line) => line.includes(` name=${name} `));

  beforeAll(async () => {
    server = await RedisServer.start();
    first = await startWaitPod('express', named(`first-${process.pid}`));
    second = await startWaitPod('fastify', named(`second-${process.pid}`));
  });
  afterAll(async () => {
    await first?.app.close();
    await second?.app.close();
    await server?.stop();
  });

  waitingScenarios(() => ({ first, second }));

  it('1 000 waiting duplicates cost one subscriber connection; each gets the replay', async () => {
    await manyWaiters(first, second, 1_000, async () => {
      // Its subscriber opens while the first waiter registers: awaited, not assumed.
      await until(() => connections(`second-${process.pid}`).some((line) => / sub=1 /.test(line)));
      const mine = connections(`second-${process.pid}`);
      expect(mine.filter((line) => / sub=1 /.test(line))).toHaveLength(1);
      // The store's own connection and the subscriber: none per waiter.
      expect(mine).toHaveLength(2);
    });
  }, 120_000);

  it('a store that listened closes its subscriber on close, also on a client the application owns', async () => {
    const store = new RedisStore({ url: server.url, redisOptions: { connectionName: `closing-${process.pid}` } });
    await store.listen(() => undefined);
    const subscribed = () => connections(`closing-${process.pid}`).filter((line) => / sub=1 /.test(line)).length;
    expect(subscribed()).toBe(1);
    await store.close();
    await until(() => subscribed() === 0);
  });

  it('a route without inFlight: wait publishes nothing; a waiting route one PUBLISH per settle', async () => {
    const published = () => server.commandStats().publish ?? 0;
    const before = published();
    expect((await post(first.base, '/wait/conflict', waitKey())).status).toBe(201);
    expect(published()).toBe(before);
    expect((await post(first.base, '/wait/pay', waitKey())).status).toBe(201);
    expect(published()).toBe(before + 1);
    // A pod none of whose duplicates ever waited has no subscriber.
    expect(connections(`first-${process.pid}`).filter((line) => / sub=1 /.test(line))).toHaveLength(0);
  });
});

describeRedis("inFlight: 'wait' while redis-server restarts", () => {
  let server: RedisServer;
  let first: WaitPod;
  let second: WaitPod;
  const subscribers = (name: string) =>
    server
      .cli('CLIENT', 'LIST', 'TYPE', 'pubsub')
      .split('\n')
      .filter((line) => line.includes(` name=${name} `)).length;

  beforeAll(async () => {
    server = await RedisServer.start([], { ownServer: true });
    const store = (name: string) => new RedisStore({ url: server.url, redisOptions: { connectionName: name } });
    first = await startWaitPod('fastify', store('first'));
    second = await startWaitPod('express', store('second'));
  });
  // A test that fails half-way leaves no handler held for the shutdown to wait on.
  afterEach(() => first?.gate.release());
  afterAll(async () => {
    await first?.app.close();
    await second?.app.close();
    await server?.stop();
  });

  it('a duplicate waiting through the restart is woken once its subscriber is back and the first is stored', async () => {
    const scripts = () => {
      const stats = server.commandStats();
      return (stats.evalsha ?? 0) + (stats.eval ?? 0);
    };
    const before = scripts();
    await waitThroughRestart(first, second, {
      // Its two looks (the claim, and again once registered) have reached Redis, and it subscribed: a
      // look after the restart would find the key empty (this server keeps nothing), as any retry would.
      ready: () => scripts() >= before + 3 && subscribers('second') === 1,
      restart: async () => {
        await server.stop();
        await server.resume();
      },
      // ioredis subscribes again by itself once it has reconnected.
      listening: () => subscribers('second') === 1,
    });
  }, 60_000);
});
