import { describe, expect, it } from '@jest/globals';
import type { ArgumentsHost } from '@nestjs/common';
import { lastValueFrom, type Observable } from 'rxjs';
import { IdempotencyException, InMemoryStore } from '../../lib/index.js';
import type { StoredResponse } from '../../lib/stores/index.js';
import { resolveModuleOptions } from '../../lib/shared/options/module-options.resolver.js';
import { IdempotencyExceptionFilter } from '../../lib/nest/idempotency.filter.js';
import { IdempotentReplay } from '../../lib/shared/exceptions/idempotent-replay.exception.js';
import { httpContext } from '../support/contexts.js';
import { FakeResponse } from '../support/fake-response.js';

const stored: StoredResponse = { status: 201, headers: {}, body: Buffer.from('ok') };
const filter = () => new IdempotencyExceptionFilter(resolveModuleOptions({}, () => new InMemoryStore()));

describe('IdempotencyExceptionFilter', () => {
  it('names IdempotencyModule when it is not imported (Nest would list an injection token)', () => {
    expect(() => new IdempotencyExceptionFilter(undefined as never)).toThrow(
      '@Idempotent() needs IdempotencyModule: add IdempotencyModule.forRoot() (or forRootAsync()) to the imports of your AppModule',
    );
  });

  it('writes nothing where the interceptor has answered already', () => {
    const res = new FakeResponse();
    res.end('answered');
    const host = httpContext({ response: res });
    expect(filter().catch(new IdempotentReplay(stored), host)).toBeUndefined();
    expect(filter().catch(new IdempotencyException(409, 'busy'), host)).toBeUndefined();
    expect(res.calls).toEqual([{ method: 'end', args: ['answered'] }]);
    expect(res.getHeaders()).toEqual({});
  });

  // An IdempotencyException a handler threw itself reached here unwritten, and the request hung.
  it('writes an answer nothing has written yet: the exception as the module writes its own', () => {
    const res = new FakeResponse();
    expect(filter().catch(new IdempotencyException(409, 'busy'), httpContext({ response: res }))).toBeUndefined();
    expect(res.statusCode).toBe(409);
    expect(res.calls.map((c) => c.method)).toContain('end');
    expect(String(res.calls.find((c) => c.method === 'end')!.args[0])).toBe('{"error":"busy"}');
  });

  it("on an RPC call, passes the handler's own exception on as the reply's error", async () => {
    const own = new IdempotencyException(409, 'busy');
    const host = { getType: () => 'rpc' } as ArgumentsHost;
    const reply = filter().catch(own, host) as Observable<unknown>;
    expect(await lastValueFrom(reply).catch((err: unknown) => err)).toBe(own);
  });

  it('on GraphQL leaves the error to the resolver chain, and throws it on to a transport of your own', () => {
    const own = new IdempotencyException(409, 'busy');
    expect(filter().catch(own, { getType: () => 'graphql' } as ArgumentsHost)).toBeUndefined();
    expect(() => filter().catch(own, { getType: () => 'bus' } as ArgumentsHost)).toThrow(own);
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
