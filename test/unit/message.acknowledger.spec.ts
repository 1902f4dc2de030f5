import { describe, expect, it, jest } from '@jest/globals';
import { type CallHandler, Controller } from '@nestjs/common';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host.js';
import { EventPattern, MessagePattern, RpcException } from '@nestjs/microservices';
import { from, lastValueFrom, type Observable, of, throwError } from 'rxjs';
import { IdempotencyException, Idempotent, InMemoryStore } from '../../lib/index.js';
import { ATTEMPT_COUNTS } from '../../lib/shared/idempotency.constants.js';
import type { ResolvedRouteOptions } from '../../lib/shared/interfaces/resolved-options.interface.js';
import { MessageAcknowledger } from '../../lib/transports/messages/message.acknowledger.js';
import { spyOnLogger } from '../support/logger.js';
import { createProtocol, destroyProtocolsAfterEach } from '../support/protocol.js';
import { until } from '../support/timing.js';

// Message patterns where a value is read back: an event handler's value is not stored (Nest sends no reply).
@Controller()
class Orders {
  @MessagePattern('order.created')
  @Idempotent({ ack: true, maxAttempts: 2 })
  created(data: unknown) {
    return data;
  }

  @EventPattern('order.noted')
  @Idempotent({ ack: true, missingKey: 'pass-through' })
  noted(data: unknown) {
    return data;
  }

  @MessagePattern('order.read')
  @Idempotent()
  read(data: unknown) {
    return data;
  }

  @MessagePattern('order.manual')
  @Idempotent({ ack: 'skipped', missingKey: 'pass-through' })
  manual(data: unknown) {
    return data;
  }
}

/** What an amqplib channel was told, in order; `closed` makes it throw as a closed channel does. */
class FakeChannel {
  readonly calls: string[] = [];
  closed = false;
  /** Its 'error' listeners, as amqplib's EventEmitter keeps them. */
  readonly errorListeners: ((err: unknown) => void)[] = [];
  on(event: string, listener: (err: unknown) => void): this {
    if (event === 'error') this.errorListeners.push(listener);
    return this;
  }
  ack(message: { id: string }): void {
    this.settle(`ack ${message.id}`);
  }
  nack(message: { id: string }, allUpTo: boolean, requeue: boolean): void {
    this.settle(`${requeue ? 'requeue' : 'reject'} ${message.id}${allUpTo ? ' all' : ''}`);
  }
  private settle(call: string): void {
    if (this.closed) throw new Error('Channel closed');
    this.calls.push(call);
  }
}

/** An RmqContext's shape: the delivery and the channel it came on. */
const rmq = (channel: FakeChannel, id: string, messageId?: string) => ({
  getMessage: () => ({ id, properties: { messageId } }),
  getChannelRef: () => channel,
  getPattern: () => 'order.created',
});

/** A NatsContext's shape: headers with get(), '' for one that is absent. */
const nats = (headers: Record<string, string>) => ({
  getHeaders: () => ({ get: (name: string) => headers[name] ?? '' }),
  getSubject: () => 'orders',
});

function setup(handler: 'created' | 'noted' | 'read' | 'manual' = 'created') {
  const { interceptor } = createProtocol({ store: new InMemoryStore() });
  const call = async (data: unknown, ctx: unknown, handle: () => Observable<unknown> = () => of('ran')) => {
    const context = new ExecutionContextHost([data, ctx], Orders, Orders.prototype[handler]);
    context.setType('rpc');
    const next: CallHandler = { handle };
    try {
      return await lastValueFrom(await interceptor.intercept(context, next));
    } catch (err) {
      return err instanceof RpcException ? err.getError() : err;
    }
  };
  return { call };
}

const failing = () => throwError(() => new Error('card declined'));

describe('MessageAcknowledger and the message key (RabbitMQ manual acks, NATS ids)', () => {
  destroyProtocolsAfterEach();
  const logs = spyOnLogger();
  const errored = () => logs.errors.mock.calls.map((args: unknown[]) => args[0]);

  it("the transport's message id is the key before data.idempotencyKey; NATS's Nats-Msg-Id too", async () => {
    const { call } = setup('read');
    const channel = new FakeChannel();
    const data = { idempotencyKey: 'field' };
    expect(await call(data, rmq(channel, 'd1', 'mid-1'), () => of('first'))).toBe('first');
    expect(await call(data, rmq(channel, 'd2', 'mid-1'), () => of('again'))).toBe('first');
    // Another messageId, the same field: another message. No messageId: the field is the key.
    expect(await call(data, rmq(channel, 'd3', 'mid-2'), () => of('second'))).toBe('second');
    expect(await call(data, rmq(channel, 'd4'), () => of('by field'))).toBe('by field');
    expect(await call(data, rmq(channel, 'd5'), () => of('by field again'))).toBe('by field');
    expect(await call({}, nats({ 'Nats-Msg-Id': 'n-1' }), () => of('nats'))).toBe('nats');
    expect(await call({}, nats({ 'Nats-Msg-Id': 'n-1' }), () => of('nats again'))).toBe('nats');
    expect(await call({ idempotencyKey: 'field' }, nats({}), () => of('fallback'))).toBe('by field');
    expect(await call({}, { getHeaders: () => undefined, getSubject: () => 's' })).toMatchObject({
      code: 'IDEMPOTENCY_KEY_MISSING',
    });
    // Only a whole RabbitMQ or NATS context is read: a half (another transport's) or none falls back to the field.
    const half = [
      undefined,
      { getMessage: () => ({ properties: { messageId: 'not-rmq' } }) },
      { getHeaders: () => ({ get: () => 'not-nats' }) },
      { getMessage: () => undefined, getChannelRef: () => channel },
      { getMessage: () => ({}), getChannelRef: () => channel },
    ];
    for (const ctx of half) expect(await call(data, ctx, () => of('other'))).toBe('by field');
    // Without ack: true the module never touches the channel.
    expect(channel.calls).toEqual([]);
  });

  // Issue 44 item 5: Nest's manual-ack recipe left every skipped duplicate unacknowledged.
  it("ack: 'skipped': what the handler runs is its own to settle; a duplicate, one in flight and a refusal are the module's", async () => {
    const { call } = setup('manual');
    const channel = new FakeChannel();
    expect(await call({}, rmq(channel, 'd1', 'm-1'))).toBe('ran');
    expect(await call({}, rmq(channel, 'd2', 'm-1'), () => of('again'))).toBe('ran');
    expect(await call({}, rmq(channel, 'd3', 'm-2'), failing)).toEqual(new Error('card declined'));
    expect(await call({}, rmq(channel, 'd4'), () => of('no key'))).toBe('no key');
    expect(channel.calls).toEqual(['ack d2']);
    let release!: () => void;
    const held = call({}, rmq(channel, 'd5', 'm-3'), () => from(new Promise<string>((r) => (release = () => r('slow')))));
    await until(() => release !== undefined);
    expect(await call({}, rmq(channel, 'd6', 'm-3'))).toMatchObject({ code: 'IDEMPOTENCY_KEY_IN_FLIGHT' });
    release();
    expect(await held).toBe('slow');
    await until(() => channel.calls.length === 2);
    expect(channel.calls).toEqual(['ack d2', 'requeue d6']);
  });

  it("ack: true on a queue consumed with noAck: true: the channel's close for an unknown delivery tag is logged once", async () => {
    const { call } = setup();
    const channel = new FakeChannel();
    await call({}, rmq(channel, 'd1', 'w-1'));
    await call({}, rmq(channel, 'd2', 'w-2'));
    expect(channel.errorListeners).toHaveLength(1);
    const tag = new Error(
      'Channel closed by server: 406 (PRECONDITION-FAILED) with message "PRECONDITION_FAILED - unknown delivery tag 1"',
    );
    for (const listener of channel.errorListeners) listener(new Error('Channel closed by server: 320 (CONNECTION-FORCED)'));
    expect(errored()).toEqual([]);
    for (const listener of channel.errorListeners) listener(tag);
    for (const listener of channel.errorListeners) listener(tag);
    expect(errored()).toEqual([expect.stringContaining("Orders.created: RabbitMQ closed the channel on the module's ack")]);
    expect(errored()[0]).toContain('Set noAck: false');
    const other = new FakeChannel();
    await call({}, rmq(other, 'd3', 'w-3'));
    for (const listener of other.errorListeners) listener(tag);
    expect(errored()).toHaveLength(1);
  });

  it('acks once the outcome is recorded, a duplicate too; a handler failure is requeued after a pause', async () => {
    const { call } = setup();
    const channel = new FakeChannel();
    expect(await call({}, rmq(channel, 'd1', 'm-1'))).toBe('ran');
    expect(await call({}, rmq(channel, 'd2', 'm-1'), () => of('again'))).toBe('ran');
    expect(channel.calls).toEqual(['ack d1', 'ack d2']);
    expect(await call({}, rmq(channel, 'd3', 'm-2'), failing)).toEqual(new Error('card declined'));
    expect(channel.calls).toEqual(['ack d1', 'ack d2']);
    await until(() => channel.calls.length === 3);
    expect(channel.calls[2]).toBe('requeue d3');
  });

  it('the maxAttempts-th failure of an id is rejected without requeue and logged; a success in between starts the count anew', async () => {
    const { call } = setup();
    const channel = new FakeChannel();
    await call({}, rmq(channel, 'd1', 'm-3'), failing);
    await call({}, rmq(channel, 'd2', 'm-3'), () => of('ok'));
    await call({ again: true }, rmq(channel, 'd3', 'm-4'), failing);
    await call({ again: true }, rmq(channel, 'd4', 'm-4'), failing);
    expect(channel.calls).toEqual(['ack d2', 'reject d4']);
    expect(errored()).toEqual([
      'Orders.created: message "m-4" failed 2 times; rejected without requeue, its key freed. A queue with a dead-letter exchange parks it there; without one, RabbitMQ deletes it',
    ]);
    // The parked id was forgotten: a producer's resend is tried anew.
    await call({ again: true }, rmq(channel, 'd5', 'm-4'), failing);
    await until(() => channel.calls.includes('requeue d5'));
  });

  it('a refusal that a redelivery cannot change is rejected; one it can (in flight) is requeued', async () => {
    const { call } = setup();
    const channel = new FakeChannel();
    await call({ amount: 1 }, rmq(channel, 'd1', 'm-5'));
    expect(await call({ amount: 2 }, rmq(channel, 'd2', 'm-5'))).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED' });
    expect(await call({}, rmq(channel, 'd3'))).toMatchObject({ code: 'IDEMPOTENCY_KEY_MISSING' });
    let release!: () => void;
    const held = call({}, rmq(channel, 'd4', 'm-6'), () => from(new Promise<string>((r) => (release = () => r('done')))));
    await until(() => release !== undefined);
    expect(await call({}, rmq(channel, 'd5', 'm-6'))).toMatchObject({ code: 'IDEMPOTENCY_KEY_IN_FLIGHT' });
    release();
    expect(await held).toBe('done');
    await until(() => channel.calls.includes('requeue d5'));
    expect(channel.calls).toEqual(['ack d1', 'reject d2', 'reject d3', 'ack d4', 'requeue d5']);
    expect(errored()).toEqual([
      'Orders.created: message "m-5" was rejected without requeue (key-reused): delivering it again cannot succeed. A queue with a dead-letter exchange parks it there; without one, RabbitMQ deletes it',
      'Orders.created: message (none) was rejected without requeue (key-missing): delivering it again cannot succeed. A queue with a dead-letter exchange parks it there; without one, RabbitMQ deletes it',
    ]);
  });

  it('pass-through: a keyless message is acked when its handler returns, rejected when it throws (nothing counts its tries)', async () => {
    const { call } = setup('noted');
    const channel = new FakeChannel();
    expect(await call({}, rmq(channel, 'd1'))).toBe('ran');
    expect(await call({}, rmq(channel, 'd2'), failing)).toEqual(new Error('card declined'));
    expect(channel.calls).toEqual(['ack d1', 'reject d2']);
  });

  it('a closed channel (a lost connection) is no error: the broker redelivers what it held', async () => {
    const { call } = setup();
    const channel = new FakeChannel();
    channel.closed = true;
    expect(await call({}, rmq(channel, 'd1', 'm-7'))).toBe('ran');
    expect(await call({}, rmq(channel, 'd2'))).toMatchObject({ code: 'IDEMPOTENCY_KEY_MISSING' });
    expect(await call({}, rmq(channel, 'd3', 'm-8'), failing)).toEqual(new Error('card declined'));
  });

  it(`counts the failures of at most ${ATTEMPT_COUNTS} ids, forgetting the oldest first`, () => {
    const acks = new MessageAcknowledger();
    const channel = new FakeChannel();
    const route = { id: 'Orders.created', message: { keyFrom: undefined, ack: true, maxAttempts: 2 } } as ResolvedRouteOptions;
    const fail = (key: string) => {
      const context = new ExecutionContextHost([{}, rmq(channel, key, key)]);
      acks.delivery(context, route)!.failed(new Error('declined'), key);
    };
    fail('first');
    for (let i = 0; i < ATTEMPT_COUNTS - 1; i++) fail(`filler-${i}`);
    fail('kept'); // one id too many: 'first' is forgotten
    fail('kept');
    fail('first');
    // 'kept' failed twice and was parked; 'first''s second failure counted as its first.
    expect(channel.calls).toEqual(['reject kept']);
    // Not a RabbitMQ delivery (TCP, Redis, a Kafka message without a channel, none): nothing to acknowledge.
    for (const ctx of [{}, undefined, { getMessage: () => ({}) }, { getChannelRef: () => channel }]) {
      expect(acks.delivery(new ExecutionContextHost([{}, ctx]), route)).toBeUndefined();
    }
  });

  it('remembers exactly ATTEMPT_COUNTS ids; a recorded outcome forgets the count; an IdempotencyException without a code is a failure', () => {
    const acks = new MessageAcknowledger();
    const channel = new FakeChannel();
    const route = { id: 'Orders.created', message: { keyFrom: undefined, ack: true, maxAttempts: 2 } } as ResolvedRouteOptions;
    const delivery = (key: string) => acks.delivery(new ExecutionContextHost([{}, rmq(channel, key, key)]), route)!;
    delivery('first').failed(new Error('declined'), 'first');
    for (let i = 0; i < ATTEMPT_COUNTS - 1; i++) delivery(`filler-${i}`).failed(new Error('declined'), `filler-${i}`);
    delivery('first').failed(new Error('declined'), 'first');
    expect(channel.calls).toEqual(['reject first']);
    delivery('again').failed(new Error('declined'), 'again');
    delivery('again').done('again');
    delivery('again').failed(new IdempotencyException(409, 'an inner key is busy'), 'again');
    expect(channel.calls).toEqual(['reject first', 'ack again']);
  });

  // Issue 44 item 1: two ack: true handlers Nest chained on one event acked, then nacked, one delivery.
  describe('the handlers Nest chains on one event settle its delivery once', () => {
    class Billing {
      @EventPattern('order.paid')
      @Idempotent({ ack: true })
      paid(_data: unknown) {}
    }
    class Mailer {
      @EventPattern(['order.paid', 'order.refunded'])
      @Idempotent({ ack: true })
      paid(_data: unknown) {}
    }
    const route = { id: 'Billing.paid', message: { ack: true, maxAttempts: 3 } } as ResolvedRouteOptions;
    /** One amqplib message per delivery id: the object every handler of the delivery is given. */
    const messages = new Map<string, object>();
    const delivery = (acks: MessageAcknowledger, channel: FakeChannel, id: string, pattern = 'order.paid') => {
      if (!messages.has(id)) messages.set(id, { id, properties: { messageId: id } });
      const ctx = { getMessage: () => messages.get(id), getChannelRef: () => channel, getPattern: () => pattern };
      return acks.delivery(new ExecutionContextHost([{}, ctx]), route)!;
    };
    const registered = () => {
      const acks = new MessageAcknowledger();
      acks.register(Billing.prototype.paid);
      acks.register(Mailer.prototype.paid);
      return acks;
    };

    it('acked once when both are done; requeued once when one can still succeed; rejected when none can', async () => {
      const acks = registered();
      const channel = new FakeChannel();
      const [a, b] = [delivery(acks, channel, 'd1'), delivery(acks, channel, 'd1')];
      a.done('k');
      expect(channel.calls).toEqual([]);
      b.done('k');
      const [c, d] = [delivery(acks, channel, 'd2'), delivery(acks, channel, 'd2')];
      c.done('k2');
      d.failed(new Error('mail server down'), 'k2');
      const [e, f] = [delivery(acks, channel, 'd3'), delivery(acks, channel, 'd3')];
      e.failed(IdempotencyException.of('key-reused', 'other data'), 'k3');
      f.unreadable('no key');
      // The other order: one that can still succeed, then one that cannot.
      const [g, h] = [delivery(acks, channel, 'd8'), delivery(acks, channel, 'd8')];
      g.failed(new Error('mail server down'), 'k8');
      h.unreadable('no key');
      await until(() => channel.calls.length === 4);
      expect(channel.calls).toEqual(['ack d1', 'reject d3', 'requeue d2', 'requeue d8']);
      // A pattern only one of them has: one handler, settled at once.
      delivery(acks, channel, 'd4', 'order.refunded').done('k4');
      delivery(acks, channel, 'd5', 'order.unknown').done('k5');
      expect(channel.calls.slice(4)).toEqual(['ack d4', 'ack d5']);
    });

    it('a handler that never began (a guard refused it) does not hold the delivery: settled without it after a while', () => {
      jest.useFakeTimers();
      const acks = registered();
      const channel = new FakeChannel();
      delivery(acks, channel, 'd6').done('k6');
      jest.advanceTimersByTime(9_999);
      expect(channel.calls).toEqual([]);
      jest.advanceTimersByTime(1);
      expect(channel.calls).toEqual(['ack d6']);
      // Both began: the late one is waited for, however long it runs.
      const [g, h] = [delivery(acks, channel, 'd7'), delivery(acks, channel, 'd7')];
      g.done('k7');
      jest.advanceTimersByTime(60_000);
      expect(channel.calls).toEqual(['ack d6']);
      h.done('k7');
      expect(channel.calls).toEqual(['ack d6', 'ack d7']);
    });
  });
});

describe('MessageAcknowledger: the log line, the pause, channels of other shapes', () => {
  const logs = spyOnLogger();
  const errored = () => logs.errors.mock.calls.map((args: unknown[]) => args[0] as string);
  const route = { id: 'Orders.created', message: { ack: true, maxAttempts: 10 } } as ResolvedRouteOptions;
  const deliver = (acks: MessageAcknowledger, channel: object, message: object, extra: object = {}) =>
    acks.delivery(new ExecutionContextHost([{}, { getMessage: () => message, getChannelRef: () => channel, ...extra }]), route)!;

  it("names the message by its id as sent: quoted, a number as JSON, cut at 100 characters, '(none)' without one", () => {
    const acks = new MessageAcknowledger();
    const channel = new FakeChannel();
    // No getPattern (another transport's shape of context): one handler settles the delivery.
    deliver(acks, channel, { id: 'd1', properties: { messageId: 42 } }).unreadable('no key');
    deliver(acks, channel, { id: 'd2', properties: { messageId: 'y'.repeat(150) } }).unreadable('no key');
    deliver(acks, channel, { id: 'd3' }).unreadable('no key');
    deliver(acks, channel, { id: 'd4', properties: {} }).unreadable('no key');
    deliver(acks, channel, { id: 'd5', properties: { messageId: null } }).unreadable('no key');
    expect(channel.calls).toEqual(['reject d1', 'reject d2', 'reject d3', 'reject d4', 'reject d5']);
    expect(errored().map((line: string) => line.split(' was rejected')[0])).toEqual([
      'Orders.created: message "42"',
      `Orders.created: message "${'y'.repeat(100)}"`,
      'Orders.created: message (none)',
      'Orders.created: message (none)',
      'Orders.created: message (none)',
    ]);
  });

  it('a keyless message whose handler failed is rejected, the log saying so', () => {
    const acks = new MessageAcknowledger();
    const channel = new FakeChannel();
    deliver(acks, channel, { id: 'd1', properties: { messageId: 'm-1' } }).failed(new Error('card declined'), undefined);
    // The application's own IdempotencyException (no code of the module's) is a handler's failure too.
    deliver(acks, channel, { id: 'd2', properties: { messageId: 'm-2' } }).failed(
      new IdempotencyException(409, 'busy'),
      undefined,
    );
    expect(channel.calls).toEqual(['reject d1', 'reject d2']);
    const line = (id: string) =>
      `Orders.created: message "${id}" was rejected without requeue (its handler failed on a message without a key): delivering it again cannot succeed. A queue with a dead-letter exchange parks it there; without one, RabbitMQ deletes it`;
    expect(errored()).toEqual([line('m-1'), line('m-2')]);
  });

  it('a failed run is requeued after a pause that doubles from 1 s, at most 30 s', () => {
    jest.useFakeTimers();
    const acks = new MessageAcknowledger();
    const channel = new FakeChannel();
    const pauses: number[] = [];
    for (let attempt = 1; attempt <= 7; attempt++) {
      const id = `d${attempt}`;
      deliver(acks, channel, { id, properties: { messageId: 'm-1' } }).failed(new Error('down'), 'm-1');
      let waited = 0;
      while (!channel.calls.includes(`requeue ${id}`)) {
        jest.advanceTimersByTime(500);
        waited += 500;
      }
      pauses.push(waited);
    }
    expect(pauses).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
  });

  it("a channel that is no EventEmitter is still settled; an 'error' without an error object is no ack on a noAck queue", () => {
    const acks = new MessageAcknowledger();
    const plain = {
      calls: [] as string[],
      ack() {
        this.calls.push('ack');
      },
      nack() {
        this.calls.push('nack');
      },
    };
    deliver(acks, plain, { id: 'd1' }).done('k');
    expect(plain.calls).toEqual(['ack']);
    const channel = new FakeChannel();
    deliver(acks, channel, { id: 'd2' }).done('k');
    for (const listener of channel.errorListeners) listener(undefined);
    expect(errored()).toEqual([]);
  });
});
