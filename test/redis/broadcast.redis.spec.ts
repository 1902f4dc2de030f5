import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, type INestMicroservice } from '@nestjs/common';
import { ClientProxyFactory, type ClientProxy, MessagePattern, Payload, Transport } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { lastValueFrom } from 'rxjs';
import { Idempotent, IdempotencyModule, RedisStore } from '../../lib/index.js';
import { DuplicateWaiters } from '../../lib/core/waiting/duplicate.waiters.js';
import { RedisServer, redisAvailable } from '../support/redis-server.js';
import { sleep, until } from '../support/timing.js';

/** Runs per key across both replicas: one process, so one counter. */
const runs = new Map<string, number>();

@Controller()
class Charges {
  @MessagePattern('charge')
  @Idempotent()
  async charge(@Payload() data: { idempotencyKey: string }) {
    runs.set(data.idempotencyKey, (runs.get(data.idempotencyKey) ?? 0) + 1);
    // Long enough that the other replica's copy meets the key in flight.
    await sleep(300);
    return { charged: data.idempotencyKey };
  }
}

// Issue 44 item 6: Nest's Redis transport hands every request to every replica; the replica that met
// the key in flight answered IDEMPOTENCY_KEY_IN_FLIGHT first, 10 times out of 10.
describe.each(redisAvailable('message handlers on two replicas of the Redis transport') ? [['Redis']] : [])(
  'two replicas on the %s transport, one RedisStore',
  () => {
    let redis: RedisServer;
    const replicas: INestMicroservice[] = [];
    let client: ClientProxy;

    beforeAll(async () => {
      redis = await RedisServer.start();
      for (let i = 0; i < 2; i++) {
        const moduleRef = await Test.createTestingModule({
          imports: [IdempotencyModule.forRoot({ store: new RedisStore({ url: redis.url }) })],
          controllers: [Charges],
        }).compile();
        const replica = moduleRef.createNestMicroservice({
          transport: Transport.REDIS,
          options: { host: '127.0.0.1', port: redis.port },
          logger: false,
        });
        await replica.listen();
        replicas.push(replica);
      }
      client = ClientProxyFactory.create({ transport: Transport.REDIS, options: { host: '127.0.0.1', port: redis.port } });
      await client.connect();
    }, 60_000);
    afterAll(async () => {
      await Promise.resolve(client?.close()).catch(() => undefined);
      await Promise.all(replicas.map((r) => r.close()));
      await redis?.stop();
    });

    it("the sender gets the run's reply, never the other replica's refusal; each request runs once", async () => {
      const keys = Array.from({ length: 10 }, (_, i) => `broadcast-${i}`);
      const replies = await Promise.all(
        keys.map((idempotencyKey) =>
          lastValueFrom(client.send<unknown>('charge', { idempotencyKey })).catch((err: unknown) => ({ refused: err })),
        ),
      );
      expect(replies).toEqual(keys.map((key) => ({ charged: key })));
      expect(keys.map((key) => runs.get(key))).toEqual(keys.map(() => 1));
      // The replica that waited answers its replay after the run's reply: no wait is left behind.
      await until(() => replicas.every((r) => r.get(DuplicateWaiters).size === 0), 20_000);
    }, 60_000);
  },
);
