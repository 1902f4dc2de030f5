import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { Controller, Injectable, type INestMicroservice } from '@nestjs/common';
import {
  ClientProxyFactory,
  type ClientProxy,
  EventPattern,
  MessagePattern,
  Payload,
  type RmqOptions,
  RmqRecordBuilder,
  Transport,
} from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import amqp from 'amqplib';
import { lastValueFrom } from 'rxjs';
import { type IdempotencyEvent, Idempotent, IdempotencyModule, InMemoryStore } from '../../lib/index.js';
import { spyOnLogger } from '../support/logger.js';
import { RabbitMqServer, rabbitAvailable } from '../support/rabbitmq-server.js';
import { until } from '../support/timing.js';

const QUEUE = 'orders';
/** Where the broker parks what the module rejects: the queue's dead-letter target. */
const PARKED = 'orders.parked';

/** What the handlers did, per message id. */
@Injectable()
class Ledger {
  readonly runs = new Map<string, number>();
  events: IdempotencyEvent[] = [];
  hold: Promise<void> | undefined;
  /** How many of the next runs throw. */
  failures = 0;

  async run(key: string): Promise<number> {
    const run = (this.runs.get(key) ?? 0) + 1;
    this.runs.set(key, run);
    await this.hold;
    if (this.failures > 0) {
      this.failures--;
      throw new Error('card declined');
    }
    return run;
  }
}

@Controller()
class OrdersConsumer {
  constructor(private readonly ledger: Ledger) {}

  @EventPattern('order.created')
  @Idempotent({ ack: true, maxAttempts: 3 })
  async created(@Payload() data: { order: string }) {
    await this.ledger.run(`created:${data.order}`);
  }

  @MessagePattern('charge')
  @Idempotent({ ack: true })
  async charge(@Payload() data: { amount: number }) {
    return { charged: data.amount, run: await this.ledger.run(`charge:${data.amount}`) };
  }
}

describe.each(rabbitAvailable('message handlers on RabbitMQ') ? [['RabbitMQ']] : [])(
  '@Idempotent({ ack: true }) on %s: a real broker, manual acks, ids from properties.messageId',
  () => {
    let broker: RabbitMqServer;
    let connection: amqp.ChannelModel;
    let channel: amqp.Channel;
    const store = new InMemoryStore();
    const ledger = new Ledger();
    let service: INestMicroservice;
    let client: ClientProxy;
    const logs = spyOnLogger();
    const errored = () => logs.errors.mock.calls.map((args: unknown[]) => args[0]);

    beforeAll(async () => {
      broker = await RabbitMqServer.start();
      connection = await amqp.connect(broker.url);
      channel = await connection.createChannel();
      await channel.assertQueue(PARKED, { durable: false });
    }, 90_000);
    afterAll(async () => {
      await connection?.close().catch(() => undefined);
      await broker?.stop();
    });

    // A consumer per test: closing it returns every delivery it left unacknowledged to the queue,
    // which is how each test checks that the module settled all of them.
    beforeEach(async () => {
      const events: IdempotencyEvent[] = [];
      const moduleRef = await Test.createTestingModule({
        imports: [IdempotencyModule.forRoot({ store, events: (e) => void events.push(e) })],
        controllers: [OrdersConsumer],
        providers: [{ provide: Ledger, useValue: ledger }],
      }).compile();
      const options: RmqOptions = {
        transport: Transport.RMQ,
        options: {
          urls: [broker.url],
          queue: QUEUE,
          noAck: false,
          queueOptions: { durable: false, deadLetterExchange: '', deadLetterRoutingKey: PARKED },
        },
      };
      service = moduleRef.createNestMicroservice({ ...options, logger: false });
      await service.listen();
      client = ClientProxyFactory.create({ transport: Transport.RMQ, options: { ...options.options!, noAck: true } });
      await client.connect();
      ledger.events = events;
    });
    afterEach(async () => {
      ledger.hold = undefined;
      ledger.failures = 0;
      await Promise.resolve(client?.close()).catch(() => undefined);
      await service?.close();
      // Nothing left unacknowledged: with the consumer gone, the queue holds no message.
      expect((await channel.checkQueue(QUEUE)).messageCount).toBe(0);
    });

    const publish = (order: string, messageId?: string) =>
      channel.sendToQueue(QUEUE, Buffer.from(JSON.stringify({ pattern: 'order.created', data: { order } })), {
        ...(messageId && { messageId }),
      });
    const settled = (route: string, count: number) =>
      until(() => ledger.events.filter((e) => e.route === `OrdersConsumer.${route}`).length >= count, 20_000);
    const parked = async (): Promise<string[]> => {
      const bodies: string[] = [];
      for (let m = await channel.get(PARKED, { noAck: true }); m; m = await channel.get(PARKED, { noAck: true })) {
        bodies.push(`${String(m.properties.messageId)} ${m.content.toString()}`);
      }
      return bodies;
    };

    it('the same messageId delivered three times at once runs the handler once; every delivery is acked', async () => {
      for (let i = 0; i < 3; i++) publish('o-1', 'msg-1');
      await settled('created', 1);
      // The duplicates that met the run in flight come back after a pause and are then skipped.
      await until(() => ledger.events.filter((e) => e.outcome === 'replayed').length >= 1, 20_000);
      await until(async () => (await channel.checkQueue(QUEUE)).messageCount === 0, 20_000);
      expect(ledger.runs.get('created:o-1')).toBe(1);
      expect(await parked()).toEqual([]);
    });

    it('a redelivery after the outcome is recorded is acked and skipped', async () => {
      publish('o-2', 'msg-2');
      await settled('created', 1);
      publish('o-2', 'msg-2');
      await until(() => ledger.events.some((e) => e.outcome === 'replayed'), 20_000);
      expect(ledger.runs.get('created:o-2')).toBe(1);
    });

    it('a duplicate in flight is requeued, not acked, until the first run is recorded', async () => {
      let release!: () => void;
      ledger.hold = new Promise<void>((r) => (release = r));
      publish('o-3', 'msg-3');
      await until(() => ledger.runs.has('created:o-3'));
      publish('o-3', 'msg-3');
      await until(() => ledger.events.filter((e) => e.outcome === 'conflict').length >= 2, 20_000);
      release();
      await until(() => ledger.events.some((e) => e.outcome === 'replayed'), 20_000);
      expect(ledger.runs.get('created:o-3')).toBe(1);
      expect(await parked()).toEqual([]);
    });

    it('a handler that fails is retried by redelivery; a success within maxAttempts is recorded once', async () => {
      ledger.failures = 2;
      publish('o-4', 'msg-4');
      await until(() => ledger.events.some((e) => e.outcome === 'executed'), 20_000);
      expect(ledger.runs.get('created:o-4')).toBe(3);
      publish('o-4', 'msg-4');
      await until(() => ledger.events.some((e) => e.outcome === 'replayed'), 20_000);
      expect(ledger.runs.get('created:o-4')).toBe(3);
    });

    it('a message that keeps failing is rejected after maxAttempts, to the dead-letter queue, never looped', async () => {
      ledger.failures = 1_000;
      publish('o-5', 'msg-5');
      let bodies: string[] = [];
      await until(async () => (bodies = [...bodies, ...(await parked())]).length > 0, 20_000);
      expect(bodies).toEqual(['msg-5 {"pattern":"order.created","data":{"order":"o-5"}}']);
      expect(ledger.runs.get('created:o-5')).toBe(3);
      expect(errored()).toContain(
        'OrdersConsumer.created: message "msg-5" failed 3 times; rejected without requeue, its key freed. A queue with a dead-letter exchange parks it there; without one, RabbitMQ deletes it',
      );
    });

    it('a message without an id is rejected, not run, and not requeued', async () => {
      publish('o-6');
      let bodies: string[] = [];
      await until(async () => (bodies = [...bodies, ...(await parked())]).length > 0, 20_000);
      expect(bodies).toEqual(['undefined {"pattern":"order.created","data":{"order":"o-6"}}']);
      expect(ledger.runs.has('created:o-6')).toBe(false);
      expect(errored()).toContain(
        'OrdersConsumer.created: message (none) was rejected without requeue (key-missing): delivering it again cannot succeed. A queue with a dead-letter exchange parks it there; without one, RabbitMQ deletes it',
      );
    });

    it('request-response: a resend with the same messageId gets the stored reply', async () => {
      const send = () =>
        lastValueFrom(client.send('charge', new RmqRecordBuilder({ amount: 9 }).setOptions({ messageId: 'pay-9' }).build()));
      const first = await send();
      expect(first).toEqual({ charged: 9, run: 1 });
      expect(await send()).toEqual(first);
      expect(ledger.runs.get('charge:9')).toBe(1);
    });
  },
);
