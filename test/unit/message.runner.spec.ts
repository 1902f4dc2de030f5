import { describe, expect, it } from '@jest/globals';
import { type CallHandler, Controller } from '@nestjs/common';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host.js';
import { MessagePattern, RpcException } from '@nestjs/microservices';
import { EMPTY, lastValueFrom, type Observable, of, throwError } from 'rxjs';
import { IdempotencyException, Idempotent, InMemoryStore } from '../../lib/index.js';
import { createProtocol, destroyProtocolsAfterEach } from '../support/protocol.js';

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
