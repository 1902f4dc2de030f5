import { describe, expect, it } from '@jest/globals';
import type { ArgumentsHost } from '@nestjs/common';
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
    const filter = new IdempotencyExceptionFilter() as unknown as { catch(e: unknown, h: ArgumentsHost): void };
    filter.catch(new IdempotentReplay(stored), host);
    filter.catch(new IdempotencyException(409, 'busy'), host);
    expect(res.calls).toEqual([]);
    expect(res.getHeaders()).toEqual({});
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
