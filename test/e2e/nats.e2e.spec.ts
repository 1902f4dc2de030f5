import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Injectable, type INestMicroservice } from '@nestjs/common';
import {
  ClientProxyFactory,
  type ClientProxy,
  EventPattern,
  MessagePattern,
  NatsRecordBuilder,
  Payload,
  Transport,
} from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { lastValueFrom } from 'rxjs';
import { type IdempotencyEvent, Idempotent, IdempotencyModule, InMemoryStore } from '../../lib/index.js';
import { NatsServer, natsAvailable } from '../support/nats-server.js';
import { until } from '../support/timing.js';

@Injectable()
class Ledger {
  readonly runs = new Map<string, number>();
  events: IdempotencyEvent[] = [];

  run(key: string): number {
    const run = (this.runs.get(key) ?? 0) + 1;
    this.runs.set(key, run);
    return run;
  }
}

@Controller()
class NatsConsumer {
  constructor(private readonly ledger: Ledger) {}

  @MessagePattern('charge')
  @Idempotent()
  charge(@Payload() data: { amount: number }) {
    return { charged: data.amount, run: this.ledger.run(`charge:${data.amount}`) };
  }

  @EventPattern('shipped')
  @Idempotent()
  shipped(@Payload() data: { order: string }) {
    this.ledger.run(`shipped:${data.order}`);
  }
}

/** A record whose Nats-Msg-Id header is `id`, as a producer sets it for JetStream's deduplication. */
function withId<T>(data: T, id?: string) {
  const h = natsHeaders();
  if (id) h.set('Nats-Msg-Id', id);
  return new NatsRecordBuilder(data).setHeaders(h).build();
}

describe.each(natsAvailable('message handlers on NATS') ? [['NATS']] : [])(
  '@Idempotent() on %s: the Nats-Msg-Id header is the key',
  () => {
    let server: NatsServer;
    let service: INestMicroservice;
    let client: ClientProxy;
    let ledger: Ledger;

    beforeAll(async () => {
      server = await NatsServer.start();
      const events: IdempotencyEvent[] = [];
      const moduleRef = await Test.createTestingModule({
        imports: [IdempotencyModule.forRoot({ store: new InMemoryStore(), events: (e) => void events.push(e) })],
        controllers: [NatsConsumer],
        providers: [Ledger],
      }).compile();
      service = moduleRef.createNestMicroservice({
        transport: Transport.NATS,
        options: { servers: [server.url] },
        logger: false,
      });
      await service.listen();
      client = ClientProxyFactory.create({ transport: Transport.NATS, options: { servers: [server.url] } });
      await client.connect();
      ledger = service.get(Ledger);
      ledger.events = events;
    }, 60_000);
    afterAll(async () => {
      await Promise.resolve(client?.close()).catch(() => undefined);
      await service?.close();
      await server?.stop();
    });

    it('a request resent with the same Nats-Msg-Id gets the first reply; another id runs again', async () => {
      const send = (id: string) => lastValueFrom(client.send('charge', withId({ amount: 3 }, id)));
      expect(await send('n-1')).toEqual({ charged: 3, run: 1 });
      expect(await send('n-1')).toEqual({ charged: 3, run: 1 });
      expect(await send('n-2')).toEqual({ charged: 3, run: 2 });
    });

    it('an event published three times with one Nats-Msg-Id runs its handler once', async () => {
      for (let i = 0; i < 3; i++) client.emit('shipped', withId({ order: 'o-1' }, 'e-1'));
      await until(() => ledger.events.filter((e) => e.route === 'NatsConsumer.shipped').length === 3, 20_000);
      expect(ledger.runs.get('shipped:o-1')).toBe(1);
    });

    it('without the header, the payload field is the key; without either, the message is refused', async () => {
      const send = (data: object) => lastValueFrom(client.send('charge', withId(data)));
      expect(await send({ amount: 4, idempotencyKey: 'f-1' })).toEqual({ charged: 4, run: 1 });
      expect(await send({ amount: 4, idempotencyKey: 'f-1' })).toEqual({ charged: 4, run: 1 });
      await expect(send({ amount: 5 })).rejects.toMatchObject({ code: 'IDEMPOTENCY_KEY_MISSING', status: 400 });
    });
  },
);
