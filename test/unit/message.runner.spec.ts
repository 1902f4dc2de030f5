import { describe, expect, it, jest } from '@jest/globals';
import { type CallHandler, Controller } from '@nestjs/common';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host.js';
import { EventPattern, MessagePattern, RpcException } from '@nestjs/microservices';
import { EMPTY, from, lastValueFrom, type Observable, of, throwError, toArray } from 'rxjs';
import { IdempotencyException, Idempotent, InMemoryStore } from '../../lib/index.js';
import { surfaceScope } from '../../lib/shared/utils/key.util.js';
import { spyOnLogger } from '../support/logger.js';
import { createProtocol, destroyProtocolsAfterEach } from '../support/protocol.js';
import { until } from '../support/timing.js';

@Controller()
class Payments {
  @MessagePattern('charge')
  @Idempotent()
  charge() {
    return undefined;
  }
}

/** The interceptor on a message handler, as Nest calls it: an rpc ExecutionContext around `data`. */
function setup(options: Parameters<typeof createProtocol>[0] = {}) {
  const { interceptor, store } = createProtocol(options);
  const call = async (data: unknown, handle: () => Observable<unknown>) => {
    const context = new ExecutionContextHost([data, {}], Payments, Payments.prototype.charge);
    context.setType('rpc');
    const next: CallHandler = { handle };
    return lastValueFrom(await interceptor.intercept(context, next));
  };
  const refusal = (data: unknown, handle = () => of('ran')) =>
    call(data, handle).then(
      () => 'answered',
      (err: unknown) => (err instanceof RpcException ? err.getError() : err),
    );
  return { call, refusal, store };
}

const MISSING = {
  code: 'IDEMPOTENCY_KEY_MISSING',
  status: 400,
  retryable: false,
  message:
    'the message has no idempotency key: give it a message id (RabbitMQ messageId, NATS Nats-Msg-Id) or data.idempotencyKey, or read it with keyFrom',
};

describe('MessageRunner (the interceptor on @MessagePattern / @EventPattern handlers)', () => {
  destroyProtocolsAfterEach();

  it('a message whose data is not an object, or whose key is empty or no string, has no key', async () => {
    const { refusal, store } = setup();
    for (const data of [undefined, null, 'k-1', 42, { idempotencyKey: '' }, { idempotencyKey: 7 }, {}]) {
      expect(await refusal(data)).toEqual(MISSING);
    }
    expect(store.calls).toEqual([]);
  });

  it('stores a handler that completes without a value as undefined, and replays it', async () => {
    const { call } = setup({ store: new InMemoryStore() });
    expect(await call({ idempotencyKey: 'k-2' }, () => EMPTY)).toBeUndefined();
    expect(await call({ idempotencyKey: 'k-2' }, () => of('ran again'))).toBeUndefined();
  });

  it("passes the handler's own errors on untouched, an IdempotencyException of the application's too", async () => {
    const { refusal } = setup();
    const own = new Error('card declined');
    expect(await refusal({ idempotencyKey: 'k-3' }, () => throwError(() => own))).toBe(own);
    const made = new IdempotencyException(409, 'busy');
    expect(await refusal({ idempotencyKey: 'k-3' }, () => throwError(() => made))).toBe(made);
    // Both freed the key: the next delivery runs.
    expect(await refusal({ idempotencyKey: 'k-3' })).toBe('answered');
  });

  // Issue 49 item 5: a generic "Internal server error", requeued up to maxAttempts with ack: true.
  it('a payload nested too deep to fingerprint is refused as body-too-deep (not retryable), the handler never run', async () => {
    const { refusal } = setup({ store: new InMemoryStore() });
    let deep: Record<string, unknown> = { leaf: 1 };
    for (let i = 0; i < 5_000; i++) deep = { next: deep };
    let ran = 0;
    const answer = await refusal({ idempotencyKey: 'k-deep', deep }, () => (ran++, of('ran')));
    expect(answer).toMatchObject({ code: 'IDEMPOTENCY_BODY_TOO_DEEP', status: 400, retryable: false });
    expect(ran).toBe(0);
  });
});

// The paths a message takes before its claim and around it, each held here (the RabbitMQ, NATS and
// Redis suites hold them too, through real brokers, but too slowly for a mutation run).
@Controller()
class Edges {
  @MessagePattern('edges.bad-key')
  @Idempotent({
    keyFrom: () => {
      throw new Error(`no order id ${'x'.repeat(300)}\n    at Edges.badKey`);
    },
  })
  badKey() {
    return 'ran';
  }

  @EventPattern('edges.bad-event')
  @Idempotent({
    ack: true,
    keyFrom: () => {
      throw new Error('no order id');
    },
  })
  badEvent(data: unknown) {
    return data;
  }

  @EventPattern('edges.bad-unacked-event')
  @Idempotent({
    keyFrom: () => {
      throw new Error('no order id');
    },
  })
  badUnackedEvent(data: unknown) {
    return data;
  }

  @MessagePattern('edges.scoped')
  @Idempotent({
    missingKey: 'pass-through',
    scope: (data: unknown) => {
      const tenant = (data as { tenant?: unknown }).tenant;
      if (tenant === 'boom') throw new Error('no tenant');
      if (tenant === 'closed') throw new IdempotencyException(403, 'tenant closed');
      return tenant as string;
    },
  })
  scoped() {
    return 'ran';
  }
}

describe('MessageRunner: reading a message, broadcast transports, pass-through', () => {
  destroyProtocolsAfterEach();
  const logs = spyOnLogger();
  const errored = () => logs.errors.mock.calls.map((args: unknown[]) => args[0]);

  function edges(options: Parameters<typeof createProtocol>[0] = { store: new InMemoryStore() }) {
    const { interceptor } = createProtocol(options);
    const call = async (
      handler: keyof Edges,
      data: unknown,
      ctx: unknown,
      handle: () => Observable<unknown> = () => of('ran'),
    ) => {
      const context = new ExecutionContextHost([data, ctx], Edges, Edges.prototype[handler]);
      context.setType('rpc');
      try {
        return await lastValueFrom((await interceptor.intercept(context, { handle })).pipe(toArray()));
      } catch (err) {
        return err instanceof RpcException ? err.getError() : err;
      }
    };
    return { call };
  }

  it("a keyFrom that throws runs nothing: the sender gets the error, the log names the handler and the error's first line", async () => {
    const { call } = edges();
    let ran = 0;
    const answer = await call('badKey', { orderId: 1 }, undefined, () => (ran++, of('ran')));
    expect(answer).toEqual(new Error(`no order id ${'x'.repeat(300)}\n    at Edges.badKey`));
    expect(ran).toBe(0);
    expect(errored()).toEqual([
      // The first line only, cut at 200 characters: never a stack or a dump of the data.
      `Edges.badKey: a message was refused: its key or scope could not be read, nothing ran: no order id ${'x'.repeat(188)}`,
    ]);
  });

  it('a scope refused by the module is logged by its code; a keyless message passes through without its scope read', async () => {
    const { call } = edges();
    expect(await call('scoped', { idempotencyKey: 'k', tenant: '' }, undefined)).toMatchObject({
      code: 'IDEMPOTENCY_SCOPE_UNRESOLVED',
    });
    expect(errored()).toEqual([
      'Edges.scoped: a message was refused: its key or scope could not be read, nothing ran: scope-unresolved',
    ]);
    // The application's own IdempotencyException: its message, as any error's.
    expect(await call('scoped', { idempotencyKey: 'k', tenant: 'closed' }, undefined)).toBeInstanceOf(IdempotencyException);
    expect(errored()[1]).toBe(
      'Edges.scoped: a message was refused: its key or scope could not be read, nothing ran: tenant closed',
    );
    // No key: passed through as the route says, its scope function never asked (it would throw).
    expect(await call('scoped', { tenant: 'boom' }, undefined, () => of(1, 2, 3))).toEqual([1, 2, 3]);
    expect(errored()).toHaveLength(2);
  });

  it("two scopes never share a handler's record", async () => {
    const { call } = edges();
    expect(await call('scoped', { idempotencyKey: 'k', tenant: 'a' }, undefined, () => of('a ran'))).toEqual(['a ran']);
    expect(await call('scoped', { idempotencyKey: 'k', tenant: 'b' }, undefined, () => of('b ran'))).toEqual(['b ran']);
    expect(await call('scoped', { idempotencyKey: 'k', tenant: 'a' }, undefined, () => of('a again'))).toEqual(['a ran']);
  });

  it('an event whose key cannot be read, on an acknowledged delivery: rejected once, nothing thrown for Nest to log again', async () => {
    const { call } = edges();
    const calls: string[] = [];
    const channel = {
      ack: () => calls.push('ack'),
      nack: (_m: unknown, _all: boolean, requeue: boolean) => calls.push(requeue ? 'requeue' : 'reject'),
    };
    const ctx = {
      getMessage: () => ({ properties: { messageId: 'm-1' } }),
      getChannelRef: () => channel,
      getPattern: () => 'edges.bad-event',
    };
    expect(await call('badEvent', {}, ctx)).toEqual([undefined]);
    expect(calls).toEqual(['reject']);
    expect(errored()).toEqual([
      'Edges.badEvent: message "m-1" was rejected without requeue (its key or scope could not be read, nothing ran: no order id): delivering it again cannot succeed. A queue with a dead-letter exchange parks it there; without one, RabbitMQ deletes it',
    ]);
  });

  it('an event whose key cannot be read, without acks: the error reaches Nest, which logs it', async () => {
    const { call } = edges();
    expect(await call('badUnackedEvent', {}, undefined)).toEqual(new Error('no order id'));
  });

  it("a message handler's records are its own, apart from an inbox consumer's of the same name", async () => {
    const store = new InMemoryStore();
    const claims = jest.spyOn(store, 'claim');
    const { call } = edges({ store });
    await call('scoped', { idempotencyKey: 'k', tenant: 't' }, undefined);
    expect(claims.mock.calls[0][0]).toContain(surfaceScope('t', 'message', 'Edges.scoped'));
  });

  // Issue 44 item 6: Nest's Redis transport hands a request to every replica, NATS too without a queue group.
  describe.each([
    ['Redis', { getChannel: () => 'orders' }, true],
    ['NATS', { getSubject: () => 'orders', getHeaders: () => ({ get: () => '' }) }, true],
    ['RabbitMQ', { getChannel: () => 'orders', getChannelRef: () => ({}) }, false],
    ['a subject without headers', { getSubject: () => 'orders' }, false],
    ['TCP', undefined, false],
  ])('a duplicate while the run is in flight, on %s', (_name, ctx, waits) => {
    it(waits ? "waits for the run's reply instead of refusing it" : 'is refused at once as in flight', async () => {
      const store = new InMemoryStore();
      const claims = jest.spyOn(store, 'claim');
      const { call } = edges({ store });
      let release!: () => void;
      const first = call('scoped', { idempotencyKey: 'k', tenant: 't' }, ctx, () =>
        from(new Promise<string>((r) => (release = () => r('first')))),
      );
      await until(() => release !== undefined);
      const second = call('scoped', { idempotencyKey: 'k', tenant: 't' }, ctx, () => of('second'));
      // The duplicate has met the run in flight before the run ends.
      await until(() => claims.mock.calls.length >= 2);
      if (!waits) expect(await second).toMatchObject({ code: 'IDEMPOTENCY_KEY_IN_FLIGHT' });
      release();
      expect(await first).toEqual(['first']);
      if (waits) expect(await second).toEqual(['first']);
    });
  });
});
