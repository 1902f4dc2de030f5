import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Injectable, type INestMicroservice } from '@nestjs/common';
import {
  type ClientOptions,
  ClientProxyFactory,
  type ClientProxy,
  EventPattern,
  MessagePattern,
  Payload,
  type RedisOptions,
  type TcpOptions,
  Transport,
} from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import type { AddressInfo, Server } from 'node:net';
import { lastValueFrom } from 'rxjs';
import { type IdempotencyEvent, IdempotencyException, Idempotent, IdempotencyModule, InMemoryStore } from '../../lib/index.js';
import { RedisServer, redisAvailable } from '../support/redis-server.js';
import { until } from '../support/timing.js';

/** What the handlers did, per key, and the module's events. */
@Injectable()
class Ledger {
  readonly runs = new Map<string, number>();
  events: IdempotencyEvent[] = [];
  /** Held handlers wait here until the test lets them finish. */
  hold: Promise<void> | undefined;
  failNext = false;

  async run(key: string): Promise<number> {
    const run = (this.runs.get(key) ?? 0) + 1;
    this.runs.set(key, run);
    await this.hold;
    if (this.failNext) {
      this.failNext = false;
      throw new Error('card declined');
    }
    return run;
  }
}

type Charge = { idempotencyKey?: string; id?: string; amount: number };

@Controller()
class PaymentsConsumer {
  constructor(private readonly ledger: Ledger) {}

  @MessagePattern('charge')
  @Idempotent()
  async charge(@Payload() data: Charge) {
    return { charged: data.amount, run: await this.ledger.run(`charge:${data.idempotencyKey}`) };
  }

  @MessagePattern('charge-by-id')
  @Idempotent({ keyFrom: (data: Charge) => data.id })
  async chargeById(@Payload() data: Charge) {
    return { charged: data.amount, run: await this.ledger.run(`by-id:${data.id}`) };
  }

  @MessagePattern('optional')
  @Idempotent({ missingKey: 'pass-through' })
  async optional(@Payload() data: Charge) {
    return { run: await this.ledger.run(`optional:${data.idempotencyKey}`) };
  }

  /** Its own IdempotencyException (an IdempotencyInbox.run() inside it, say): the sender gets it as thrown. */
  @MessagePattern('busy')
  @Idempotent()
  busy() {
    throw new IdempotencyException(409, 'the ledger is busy');
  }

  @EventPattern('shipped')
  @Idempotent()
  async shipped(@Payload() data: Charge) {
    await this.ledger.run(`shipped:${data.idempotencyKey}`);
  }
}

type Transported = { name: string; server: TcpOptions | RedisOptions; client: (port: number) => ClientOptions };

const TCP: Transported = {
  name: 'TCP',
  server: { transport: Transport.TCP, options: { host: '127.0.0.1', port: 0 } },
  client: (port) => ({ transport: Transport.TCP, options: { host: '127.0.0.1', port } }),
};

let redis: RedisServer | undefined;
const REDIS: Transported = {
  name: 'Redis',
  get server(): RedisOptions {
    return { transport: Transport.REDIS, options: { host: '127.0.0.1', port: redis!.port } };
  },
  client: () => ({ transport: Transport.REDIS, options: { host: '127.0.0.1', port: redis!.port } }),
};

const transports = [TCP, ...(redisAvailable('message handlers on the Redis transport') ? [REDIS] : [])];

describe.each(transports.map((t) => [t.name, t] as const))('@Idempotent() message handlers on the %s transport', (_, t) => {
  let service: INestMicroservice;
  let client: ClientProxy;
  let ledger: Ledger;
  beforeAll(async () => {
    if (t === REDIS) redis = await RedisServer.start();
    const events: IdempotencyEvent[] = [];
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ store: new InMemoryStore(), events: (e) => void events.push(e) })],
      controllers: [PaymentsConsumer],
      providers: [Ledger],
    }).compile();
    service = moduleRef.createNestMicroservice({ ...t.server, logger: false });
    await service.listen();
    const port = t === TCP ? (service.unwrap<Server>().address() as AddressInfo).port : 0;
    client = ClientProxyFactory.create(t.client(port));
    await client.connect();
    ledger = service.get(Ledger);
    ledger.events = events;
  }, 60_000);
  afterAll(async () => {
    await Promise.resolve(client?.close()).catch(() => undefined);
    await service?.close();
    await redis?.stop();
    redis = undefined;
  });
  afterEach(() => {
    ledger.hold = undefined;
    ledger.failNext = false;
  });

  const send = (pattern: string, data: Charge) => lastValueFrom(client.send<unknown>(pattern, data));
  const refusal = (pattern: string, data: Charge) =>
    send(pattern, data).then(
      () => 'answered',
      (err: unknown) => err,
    );

  it('a redelivered message gets the first reply; the handler runs once', async () => {
    const first = await send('charge', { idempotencyKey: 'm-1', amount: 5 });
    expect(first).toEqual({ charged: 5, run: 1 });
    expect(await send('charge', { idempotencyKey: 'm-1', amount: 5 })).toEqual(first);
    expect(ledger.runs.get('charge:m-1')).toBe(1);
    // Events reach the listener after the turn that decided them: the reply may come first.
    const outcomes = () => ledger.events.filter((e) => e.route === 'PaymentsConsumer.charge').map((e) => e.outcome);
    await until(() => outcomes().length === 2);
    expect(outcomes()).toEqual(['executed', 'replayed']);
  });

  it('duplicates while the first runs: IDEMPOTENCY_KEY_IN_FLIGHT over TCP; over Redis (broadcast) they wait for the reply', async () => {
    let release!: () => void;
    ledger.hold = new Promise<void>((r) => (release = r));
    const first = send('charge', { idempotencyKey: 'm-2', amount: 7 });
    await until(() => ledger.runs.has('charge:m-2'));
    const duplicates = Promise.all(Array.from({ length: 4 }, () => refusal('charge', { idempotencyKey: 'm-2', amount: 7 })));
    if (t === TCP) {
      expect(await duplicates).toEqual(
        Array.from({ length: 4 }, () => ({
          code: 'IDEMPOTENCY_KEY_IN_FLIGHT',
          status: 409,
          retryable: true,
          message: 'a message with this key is being processed; send it again shortly',
        })),
      );
    }
    release();
    expect(await first).toEqual({ charged: 7, run: 1 });
    if (t === REDIS) expect(await duplicates).toEqual(Array.from({ length: 4 }, () => 'answered'));
    expect(await send('charge', { idempotencyKey: 'm-2', amount: 7 })).toEqual({ charged: 7, run: 1 });
    expect(ledger.runs.get('charge:m-2')).toBe(1);
  });

  it('a key reused with other data is refused (IDEMPOTENCY_KEY_REUSED), never taken for a duplicate', async () => {
    await send('charge', { idempotencyKey: 'm-3', amount: 1 });
    expect(await refusal('charge', { idempotencyKey: 'm-3', amount: 2 })).toEqual({
      code: 'IDEMPOTENCY_KEY_REUSED',
      status: 422,
      retryable: false,
      message: 'this key was already used for a message with other data',
    });
    expect(ledger.runs.get('charge:m-3')).toBe(1);
  });

  it('a handler that throws frees the key: the redelivery runs it again', async () => {
    ledger.failNext = true;
    expect(await refusal('charge', { idempotencyKey: 'm-4', amount: 3 })).not.toBe('answered');
    expect(await send('charge', { idempotencyKey: 'm-4', amount: 3 })).toEqual({ charged: 3, run: 2 });
  });

  it('a message without a key is refused (IDEMPOTENCY_KEY_MISSING), or runs undeduplicated with missingKey: pass-through', async () => {
    expect(await refusal('charge', { amount: 3 })).toEqual({
      code: 'IDEMPOTENCY_KEY_MISSING',
      status: 400,
      retryable: false,
      message:
        'the message has no idempotency key: give it a message id (RabbitMQ messageId, NATS Nats-Msg-Id) or data.idempotencyKey, or read it with keyFrom',
    });
    expect(ledger.runs.has('charge:undefined')).toBe(false);
    expect(await send('optional', { amount: 1 })).toEqual({ run: 1 });
    expect(await send('optional', { amount: 1 })).toEqual({ run: 2 });
  });

  it("the handler's own IdempotencyException reaches the sender as it threw it, not swallowed by the module's filter", async () => {
    expect(await refusal('busy', { idempotencyKey: 'b-1', amount: 1 })).toMatchObject({
      status: 409,
      message: 'the ledger is busy',
    });
  });

  it('keyFrom reads the key where the producer put it', async () => {
    expect(await send('charge-by-id', { id: 'order-9', amount: 4 })).toEqual({ charged: 4, run: 1 });
    expect(await send('charge-by-id', { id: 'order-9', amount: 4 })).toEqual({ charged: 4, run: 1 });
    expect(ledger.runs.get('by-id:order-9')).toBe(1);
  });

  it('an event delivered three times runs its handler once; the duplicates are skipped', async () => {
    for (let i = 0; i < 3; i++) client.emit('shipped', { idempotencyKey: 'e-1', amount: 1 });
    const seen = () => ledger.events.filter((e) => e.route === 'PaymentsConsumer.shipped');
    await until(() => seen().length === 3, 20_000);
    expect(ledger.runs.get('shipped:e-1')).toBe(1);
    // One run; each duplicate met it running (conflict) or finished (replayed), never ran it again.
    const outcomes = seen().map((e) => e.outcome);
    expect(outcomes.filter((o) => o === 'executed')).toHaveLength(1);
    expect(outcomes.filter((o) => o !== 'executed' && o !== 'conflict' && o !== 'replayed')).toEqual([]);
  });
});
