import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable, type INestApplication } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { setTimeout as sleep } from 'node:timers/promises';
import { IdempotencyException, IdempotencyInbox, IdempotencyModule, Idempotent, InMemoryStore } from '../../../lib/index.js';
import { IDEMPOTENCY_TRANSPORTS } from '../../../lib/shared/idempotency.constants.js';
import { transportTable } from '../../../lib/core/transport.table.js';
import { HttpTransport } from '../../../lib/transports/http/http.transport.js';
import { MessageRunner } from '../../../lib/transports/messages/message.runner.js';
import { GraphqlRunner } from '../../../lib/transports/graphql/graphql.runner.js';
import { BusTransport } from './bus.transport.js';
import { EventBus, OnBusEvent } from './event-bus.js';

// A transport of the test suite's own, an in-process event bus, built on the transport interface and
// the public inbox alone (./bus.transport.ts): the cost of a new surface is that folder and the one
// registration line below. Its handlers keep the module's promise: one run per event id and handler,
// the first answer for a retry, a refusal for other content or a run in flight, a thrown error freeing
// the id.

@Injectable()
class Ledger {
  readonly charged: string[] = [];
  readonly mailed: string[] = [];
  failNext = false;
  holdMs = 0;

  @OnBusEvent('charge.requested')
  @Idempotent()
  async charge(event: { id: string; data: { amount: number } }) {
    if (this.holdMs) await sleep(this.holdMs);
    if (this.failNext) {
      this.failNext = false;
      throw new Error('provider down');
    }
    this.charged.push(event.id);
    return { charge: `ch_${this.charged.length}`, amount: event.data.amount };
  }

  @OnBusEvent('charge.requested')
  @Idempotent()
  receipt(event: { id: string }) {
    this.mailed.push(event.id);
    return { mailed: this.mailed.length };
  }
}

let app: INestApplication | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function start(): Promise<{ bus: EventBus; ledger: Ledger }> {
  const module = await Test.createTestingModule({
    imports: [DiscoveryModule, IdempotencyModule.forRoot({ store: new InMemoryStore() })],
    providers: [EventBus, Ledger],
  })
    // The registration line.
    .overrideProvider(IDEMPOTENCY_TRANSPORTS)
    .useFactory({
      factory: (http: HttpTransport, messages: MessageRunner, graphql: GraphqlRunner, inbox: IdempotencyInbox) =>
        transportTable([http, messages, graphql, new BusTransport(inbox)]),
      inject: [HttpTransport, MessageRunner, GraphqlRunner, IdempotencyInbox],
    })
    .compile();
  app = module.createNestApplication();
  await app.init();
  return { bus: app.get(EventBus), ledger: app.get(Ledger) };
}

const event = (id: string, amount = 5) => ({ id, type: 'charge.requested', data: { amount } });

describe('a transport of its own (an in-process event bus) on the transport interface', () => {
  it('runs each handler once per event id and answers a retry with the first answer', async () => {
    const { bus, ledger } = await start();
    const first = await bus.publish(event('evt-1'));
    const retry = await bus.publish(event('evt-1'));
    expect(first).toEqual([{ charge: 'ch_1', amount: 5 }, { mailed: 1 }]);
    expect(retry).toEqual(first);
    expect([ledger.charged, ledger.mailed]).toEqual([['evt-1'], ['evt-1']]);
    await bus.publish(event('evt-2'));
    expect([ledger.charged, ledger.mailed]).toEqual([
      ['evt-1', 'evt-2'],
      ['evt-1', 'evt-2'],
    ]);
  });

  it('refuses an id reused with other content, to the publisher, without running', async () => {
    const { bus, ledger } = await start();
    await bus.publish(event('evt-1', 5));
    const reused = await bus.publish(event('evt-1', 7)).catch((err: unknown) => err);
    expect(reused).toBeInstanceOf(IdempotencyException);
    expect((reused as IdempotencyException).code).toBe('key-reused');
    expect(ledger.charged).toEqual(['evt-1']);
  });

  it('refuses a duplicate while the first run holds the id, and the first still completes', async () => {
    const { bus, ledger } = await start();
    ledger.holdMs = 300;
    const first = bus.publish(event('evt-1'));
    // Published again until the first run's claim answers it (the first publish claims asynchronously).
    let refused: unknown;
    for (let i = 0; i < 500 && refused === undefined; i++)
      refused = await bus.publish(event('evt-1')).then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(refused).toBeInstanceOf(IdempotencyException);
    expect((refused as IdempotencyException).code).toBe('key-in-flight');
    await expect(first).resolves.toEqual([{ charge: 'ch_1', amount: 5 }, { mailed: 1 }]);
    expect(ledger.charged).toEqual(['evt-1']);
  });

  it('frees the id when the handler throws: the retry runs it', async () => {
    const { bus, ledger } = await start();
    ledger.failNext = true;
    await expect(bus.publish(event('evt-1'))).rejects.toThrow('provider down');
    expect(await bus.publish(event('evt-1'))).toEqual([{ charge: 'ch_1', amount: 5 }, { mailed: 1 }]);
    expect([ledger.charged, ledger.mailed]).toEqual([['evt-1'], ['evt-1']]);
  });
});
