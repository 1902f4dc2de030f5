import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Injectable, type INestMicroservice } from '@nestjs/common';
import { Ctx, EventPattern, MessagePattern, Payload, type RmqContext, type RmqOptions, Transport } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import amqp from 'amqplib';
import request from 'supertest';
import { IdempotencyAdmin, Idempotent, IdempotencyModule, InMemoryStore } from '../../lib/index.js';
import { startApp } from '../support/app.js';
import { Gate, Runs as HttpRuns, TestController } from '../support/fixtures.js';
import { spyOnLogger } from '../support/logger.js';
import { RabbitMqServer, rabbitAvailable } from '../support/rabbitmq-server.js';
import { until } from '../support/timing.js';

const QUEUE = 'shop';
const PARKED = 'shop.parked';

/** Runs per handler and order id: what "ran once" is checked against. */
@Injectable()
class Runs {
  readonly counts = new Map<string, number>();
  add(what: string): void {
    this.counts.set(what, (this.counts.get(what) ?? 0) + 1);
  }
  of(what: string): number {
    return this.counts.get(what) ?? 0;
  }
}

type Order = { orderId: string; tenant?: string; bad?: boolean };

const orderId = (data: Order) => data.orderId;
/** The tenant a header names: the scope of a multi-tenant consumer. */
const tenant = (_data: Order, ctx: { switchToRpc(): { getContext(): RmqContext } }) =>
  ctx.switchToRpc().getContext().getMessage().properties.headers?.['x-tenant'] as string;

@Controller()
class Billing {
  constructor(private readonly runs: Runs) {}

  // The message-handlers guide's shape: the order id is the key of every handler of the order's events.
  @EventPattern('order.created')
  @Idempotent({ ack: true, keyFrom: orderId })
  created(@Payload() data: Order) {
    this.runs.add(`billing.created:${data.orderId}`);
  }

  @EventPattern('order.shipped')
  @Idempotent({ ack: true, keyFrom: orderId })
  shipped(@Payload() data: Order) {
    this.runs.add(`billing.shipped:${data.orderId}`);
  }

  @EventPattern('order.checked')
  @Idempotent({
    ack: true,
    keyFrom: (data: Order) => {
      if (data.bad) throw new TypeError('no order id in this message');
      return data.orderId;
    },
  })
  checked(@Payload() data: Order) {
    this.runs.add(`billing.checked:${data.orderId}`);
  }

  @EventPattern('order.tenanted')
  @Idempotent({ ack: true, keyFrom: orderId, scope: tenant })
  tenanted(@Payload() data: Order, @Ctx() ctx: unknown) {
    const { headers } = (ctx as RmqContext).getMessage().properties as { headers?: Record<string, unknown> };
    this.runs.add(`billing.tenanted:${String(headers?.['x-tenant'])}:${data.orderId}`);
  }

  /** A value JSON cannot hold, returned after the work ran: a BigInt. */
  @MessagePattern('order.total')
  @Idempotent({ ack: true })
  total(@Payload() data: Order) {
    this.runs.add(`billing.total:${data.orderId}`);
    return { cents: 10n };
  }
}

/** A second handler Nest chains on the same event. */
@Controller()
class Mailer {
  constructor(private readonly runs: Runs) {}

  @EventPattern('order.created')
  @Idempotent({ ack: true, keyFrom: orderId })
  created(@Payload() data: Order) {
    this.runs.add(`mailer.created:${data.orderId}`);
  }
}

/** Nest's manual-ack recipe: the handler acks what it runs; the module the deliveries it skips. */
@Controller()
class ManualBilling {
  constructor(private readonly runs: Runs) {}

  @EventPattern('manual.created')
  @Idempotent({ ack: 'skipped', keyFrom: orderId })
  created(@Payload() data: Order, @Ctx() ctx: unknown) {
    this.runs.add(`manual.created:${data.orderId}`);
    const rmq = ctx as RmqContext;
    (rmq.getChannelRef() as amqp.Channel).ack(rmq.getMessage() as amqp.Message);
  }
}

/** `ack: true` on a queue consumed with Nest's default, `noAck: true`. */
@Controller()
class NoAckBilling {
  constructor(private readonly runs: Runs) {}

  @EventPattern('noack.created')
  @Idempotent({ ack: true, keyFrom: orderId })
  created(@Payload() data: Order) {
    this.runs.add(`noack.created:${data.orderId}`);
  }
}

describe.each(rabbitAvailable('message handlers on RabbitMQ') ? [['RabbitMQ']] : [])(
  'message handlers on %s: own records per handler, one settle per delivery, nothing left unacknowledged',
  () => {
    let broker: RabbitMqServer;
    let connection: amqp.ChannelModel;
    let channel: amqp.Channel;
    let service: INestMicroservice;
    const runs = new Runs();
    /** One store for the consumer and an HTTP app beside it, as one process (or one Redis) serves both. */
    const store = new InMemoryStore();
    const logs = spyOnLogger();
    const errored = (): string[] => logs.errors.mock.calls.map((args: unknown[]) => String(args[0]));

    beforeAll(async () => {
      broker = await RabbitMqServer.start();
      connection = await amqp.connect(broker.url);
      channel = await connection.createChannel();
      await channel.assertQueue(PARKED, { durable: false });
      const moduleRef = await Test.createTestingModule({
        imports: [IdempotencyModule.forRoot({ store })],
        controllers: [Billing, Mailer],
        providers: [{ provide: Runs, useValue: runs }],
      }).compile();
      const options: RmqOptions = {
        transport: Transport.RMQ,
        options: {
          urls: [broker.url],
          queue: QUEUE,
          noAck: false,
          // A small window: a delivery left unsettled blocks the messages behind it.
          prefetchCount: 3,
          queueOptions: { durable: false, deadLetterExchange: '', deadLetterRoutingKey: PARKED },
        },
      };
      service = moduleRef.createNestMicroservice({ ...options, logger: false });
      await service.listen();
    }, 90_000);
    afterAll(async () => {
      await service?.close();
      await connection?.close().catch(() => undefined);
      await broker?.stop();
    });

    const publish = (pattern: string, data: Order, options: amqp.Options.Publish = {}) =>
      channel.sendToQueue(QUEUE, Buffer.from(JSON.stringify({ pattern, data })), options);
    // rabbitmqctl starts an Erlang VM per call: one call a poll, and time for a loaded machine.
    const drained = () =>
      until(async () => {
        const { ready, unacked } = await broker.queue(QUEUE);
        return ready + unacked === 0;
      }, 90_000);
    const parked = async (): Promise<string[]> => {
      const ids: string[] = [];
      for (let m = await channel.get(PARKED, { noAck: true }); m; m = await channel.get(PARKED, { noAck: true })) {
        ids.push(JSON.parse(m.content.toString()).data.orderId as string);
      }
      return ids;
    };

    /** A consumer of its own queue and store, with its own controller: the options are the test's. */
    const consumer = async (controller: new (...args: never[]) => unknown, rmq: RmqOptions['options'], queue: string) => {
      const moduleRef = await Test.createTestingModule({
        imports: [IdempotencyModule.forRoot({ store: new InMemoryStore() })],
        controllers: [controller],
        providers: [{ provide: Runs, useValue: runs }],
      }).compile();
      const own = moduleRef.createNestMicroservice({
        transport: Transport.RMQ,
        options: { urls: [broker.url], queue, queueOptions: { durable: false }, ...rmq },
        logger: false,
      } as RmqOptions);
      await own.listen();
      return {
        publish: (pattern: string, data: Order) => channel.sendToQueue(queue, Buffer.from(JSON.stringify({ pattern, data }))),
        close: () => own.close(),
      };
    };

    it('one order id on two events, and two handlers of one event: each handler runs once, every delivery is acked once', async () => {
      publish('order.created', { orderId: 'o-1' });
      publish('order.shipped', { orderId: 'o-1' });
      // Both handlers of order.created ran; the channel survived (a second ack of one delivery closes it).
      await until(() => runs.of('billing.created:o-1') === 1 && runs.of('mailer.created:o-1') === 1, 60_000);
      await until(() => runs.of('billing.shipped:o-1') === 1, 60_000);
      // A redelivery of each is skipped by both handlers and acked; the next message still runs.
      publish('order.created', { orderId: 'o-1' });
      publish('order.created', { orderId: 'o-2' });
      await until(() => runs.of('billing.created:o-2') === 1 && runs.of('mailer.created:o-2') === 1, 60_000);
      await drained();
      expect([runs.of('billing.created:o-1'), runs.of('mailer.created:o-1'), runs.of('billing.shipped:o-1')]).toEqual([1, 1, 1]);
      expect(await parked()).toEqual([]);
    }, 240_000);

    it('a keyFrom that throws rejects its delivery with an error log: a full prefetch window of them does not stall the consumer', async () => {
      for (let i = 0; i < 6; i++) publish('order.checked', { orderId: `bad-${i}`, bad: true });
      publish('order.checked', { orderId: 'good' });
      await until(() => runs.of('billing.checked:good') === 1, 60_000);
      await drained();
      let ids: string[] = [];
      await until(async () => (ids = [...ids, ...(await parked())]).length === 6, 60_000);
      expect(ids.sort()).toEqual(['bad-0', 'bad-1', 'bad-2', 'bad-3', 'bad-4', 'bad-5']);
      expect(errored().filter((line) => line.includes('no order id in this message'))).toHaveLength(6);
    }, 240_000);

    it('a scope per tenant: one message id on two tenants runs once for each; a redelivery is skipped for its own tenant', async () => {
      const headers = (t: string) => ({ headers: { 'x-tenant': t } });
      publish('order.tenanted', { orderId: 'o-7' }, headers('acme'));
      publish('order.tenanted', { orderId: 'o-7' }, headers('globex'));
      await until(() => runs.of('billing.tenanted:acme:o-7') === 1 && runs.of('billing.tenanted:globex:o-7') === 1, 60_000);
      publish('order.tenanted', { orderId: 'o-7' }, headers('acme'));
      await drained();
      expect(runs.of('billing.tenanted:acme:o-7')).toBe(1);
      // No tenant header: no scope can be read, so nothing runs and the message is parked.
      publish('order.tenanted', { orderId: 'o-8' });
      let ids: string[] = [];
      await until(async () => (ids = [...ids, ...(await parked())]).length === 1, 60_000);
      expect(ids).toEqual(['o-8']);
      expect(runs.of('billing.tenanted:undefined:o-8')).toBe(0);
      // An operator finds each tenant's record under its scope and the handler.
      const admin = service.get(IdempotencyAdmin);
      const target = { messageHandler: 'Billing.tenanted', scope: 'acme' };
      expect(await admin.inspect('o-7', target)).toMatchObject({ state: 'completed' });
      expect(await admin.inspect('o-7')).toBeUndefined();
    }, 240_000);

    it('a value JSON cannot hold settles the key: the work never runs again, a redelivery is parked with an error naming the type', async () => {
      publish('order.total', { orderId: 'o-9' }, { messageId: 'total-9' });
      await until(() => runs.of('billing.total:o-9') === 1, 60_000);
      await drained();
      publish('order.total', { orderId: 'o-9' }, { messageId: 'total-9' });
      let ids: string[] = [];
      await until(async () => (ids = [...ids, ...(await parked())]).length === 1, 60_000);
      expect(runs.of('billing.total:o-9')).toBe(1);
      expect(errored()).toContainEqual(expect.stringContaining('Billing.total: its result (Object) cannot be stored as JSON'));
      expect(errored()).toContainEqual(
        expect.stringContaining('message "total-9" was rejected without requeue (result-unstorable)'),
      );
    }, 240_000);

    // Issue 44 item 5: Nest's manual-ack recipe. Five copies with prefetch 3 ran once, the duplicates
    // were skipped without an ack, and a new message never ran: the consumer stalled.
    it("ack: 'skipped': the handler acks what it runs, the module the duplicates it skips: the consumer never stalls", async () => {
      const manual = await consumer(ManualBilling, { noAck: false, prefetchCount: 3 }, 'shop.manual');
      try {
        for (let i = 0; i < 5; i++) manual.publish('manual.created', { orderId: 'm-1' });
        manual.publish('manual.created', { orderId: 'm-2' });
        await until(() => runs.of('manual.created:m-2') === 1, 60_000);
        await until(async () => {
          const { ready, unacked } = await broker.queue('shop.manual');
          return ready + unacked === 0;
        }, 90_000);
        expect([runs.of('manual.created:m-1'), runs.of('manual.created:m-2')]).toEqual([1, 1]);
      } finally {
        await manual.close();
      }
    }, 240_000);

    // Issue 44 item 5: ack: true on a queue Nest consumes with noAck: true (its default) closed the
    // channel after the first message, and nothing said why.
    it('ack: true on a noAck: true queue: the channel RabbitMQ closes on the ack is logged once, saying what to set', async () => {
      const before = errored().length;
      const unacked = await consumer(NoAckBilling, {}, 'shop.noack');
      try {
        unacked.publish('noack.created', { orderId: 'n-1' });
        await until(
          () =>
            errored()
              .slice(before)
              .some((line) => line.includes('unknown delivery tag')),
          60_000,
        );
        expect(
          errored()
            .slice(before)
            .filter((line) => line.includes('unknown delivery tag')),
        ).toEqual([
          expect.stringContaining(
            'NoAckBilling.created: RabbitMQ closed the channel on the module\'s ack ("unknown delivery tag")',
          ),
        ]);
        expect(errored().slice(before).join('\n')).toContain('Set noAck: false in the microservice');
      } finally {
        await unacked.close();
      }
    }, 240_000);

    // Issue 49 item 1: a web client that sent the next message's id as its key got that message
    // refused as key-reused and dead-lettered, for the whole TTL.
    it("an HTTP client that sends a message's id as its Idempotency-Key cannot block the message", async () => {
      const web = await startApp('express', {
        imports: [IdempotencyModule.forRoot({ store })],
        controllers: [TestController],
        providers: [HttpRuns, Gate],
      });
      // Last: closing this app closes the store it shares with the consumer.
      try {
        const sent = await request(web.getHttpServer()).post('/payments').set('Idempotency-Key', 'pay-11').send({ any: 'thing' });
        expect(sent.status).toBe(201);
        publish('order.total', { orderId: 'o-11' }, { messageId: 'pay-11' });
        await until(() => runs.of('billing.total:o-11') === 1, 60_000);
        await drained();
        expect(await parked()).toEqual([]);
      } finally {
        await web.close();
      }
    }, 240_000);
  },
);
