import { describe, expect, it } from '@jest/globals';
import type { ArgumentsHost } from '@nestjs/common';
import { lastValueFrom, type Observable } from 'rxjs';
import { IdempotencyException, type StoredResponse } from '../../lib/index.js';
import { IdempotencyExceptionFilter } from '../../lib/idempotency.filter.js';
import { IdempotentReplay } from '../../lib/exceptions/idempotent-replay.exception.js';
import { httpContext } from '../support/contexts.js';
import { FakeResponse } from '../support/fake-response.js';

const stored: StoredResponse = { status: 201, headers: {}, body: Buffer.from('ok') };

describe('IdempotencyExceptionFilter', () => {
  it('writes nothing: the interceptor has answered already', () => {
    const res = new FakeResponse();
    const host = httpContext({ response: res });
    const filter = new IdempotencyExceptionFilter();
    expect(filter.catch(new IdempotentReplay(stored), host)).toBeUndefined();
    expect(filter.catch(new IdempotencyException(409, 'busy'), host)).toBeUndefined();
    expect(res.calls).toEqual([]);
    expect(res.getHeaders()).toEqual({});
  });

  it("on an RPC call, passes the handler's own exception on as the reply's error", async () => {
    const own = new IdempotencyException(409, 'busy');
    const host = { getType: () => 'rpc' } as ArgumentsHost;
    const reply = new IdempotencyExceptionFilter().catch(own, host) as Observable<unknown>;
    expect(await lastValueFrom(reply).catch((err: unknown) => err)).toBe(own);
  });
});

describe('IdempotencyException', () => {
  it('is an HttpException with a small JSON body and no headers by default', () => {
    const e = new IdempotencyException(422, 'reused');
    expect(e.getStatus()).toBe(422);
    expect(e.getResponse()).toEqual({ error: 'reused' });
    expect(e.reason).toBe('reused');
    expect(e.headers).toEqual({});
  });
});
