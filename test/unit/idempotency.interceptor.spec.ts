import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { type CallHandler, type ExecutionContext, Logger, StreamableFile } from '@nestjs/common';
import type { ModuleRef } from '@nestjs/core';
import { lastValueFrom, Observable, of, Subject, throwError } from 'rxjs';
import { IdempotencyInterceptor } from '../../lib/index.js';
import { IDEMPOTENCY_KEY_PROPERTY, IDEMPOTENT_ROUTE_METADATA } from '../../lib/idempotency.constants.js';
import { IdempotencyService } from '../../lib/idempotency.service.js';
import { resolveModuleOptions } from '../../lib/utils/options.util.js';
import { FakeResponse } from '../support/fake-response.js';
import { ScriptedStore } from '../support/scripted-store.js';

const tick = () => new Promise((r) => setImmediate(r));

const services: IdempotencyService[] = [];

function setup(routeOptions: object = {}) {
  const store = new ScriptedStore();
  const service = new IdempotencyService(resolveModuleOptions({ cache: store }), {} as ModuleRef);
  services.push(service);
  const interceptor = new IdempotencyInterceptor(service);
  const handler = () => undefined;
  Reflect.defineMetadata(IDEMPOTENT_ROUTE_METADATA, routeOptions, handler);
  const res = new FakeResponse();
  const req: Record<string | symbol, unknown> = {
    method: 'POST',
    url: '/pay',
    headers: { 'idempotency-key': 'k' },
    body: { a: 1 },
  };
  const context = (type = 'http', response: object = res) =>
    ({
      getType: () => type,
      getHandler: () => handler,
      switchToHttp: () => ({ getRequest: () => req, getResponse: () => response }),
    }) as unknown as ExecutionContext;
  const held = () => (service as unknown as { held: Set<unknown> }).held.size;
  return { store, service, interceptor, res, req, context, held };
}

const next = (source: Observable<unknown>): CallHandler => ({ handle: () => source });

let warnings: ReturnType<typeof jest.spyOn>;
// Inside each describe, not at the root: test/mutation/ imports this file next to others.
function spyOnLogger(): void {
  beforeEach(() => {
    warnings = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });
  afterEach(() => {
    jest.restoreAllMocks();
    for (const service of services.splice(0)) service.onModuleDestroy();
  });
}

describe('IdempotencyInterceptor', () => {
  spyOnLogger();
  it('leaves non-HTTP contexts alone', async () => {
    const { interceptor, store, context } = setup();
    const source = of(1);
    expect(await interceptor.intercept(context('rpc'), next(source))).toBe(source);
    expect(store.calls).toEqual([]);
  });

  it('passes a request without a key straight through on a pass-through route', async () => {
    const { interceptor, store, context, req, held } = setup({ missingHeader: 'pass-through' });
    req.headers = {};
    const source = of(1);
    expect(await interceptor.intercept(context(), next(source))).toBe(source);
    expect(store.calls).toEqual([]);
    expect(req[IDEMPOTENCY_KEY_PROPERTY]).toBeUndefined();
    expect(held()).toBe(0);
  });

  it('claims, hands the key to @IdempotencyKey(), and commits what end() sends before it goes out', async () => {
    const { interceptor, store, context, req, res, held } = setup();
    const out = await interceptor.intercept(context(), next(of({ id: 1 })));
    expect(store.calls.map((c) => c[0])).toEqual(['claim']);
    expect(req[IDEMPOTENCY_KEY_PROPERTY]).toBe('k');
    expect(held()).toBe(1);
    expect(await lastValueFrom(out)).toEqual({ id: 1 });
    expect(held()).toBe(0);
    let commit!: (stored: boolean) => void;
    store.commitAnswer = () => new Promise((r) => (commit = r));
    res.statusCode = 201;
    res.raw.end('{"id":1}');
    await tick();
    expect(store.calls[1]).toEqual([
      'commit',
      'idem:%:k',
      (store.calls[0][2] as { owner: string }).owner,
      { fingerprint: (store.calls[0][2] as { fingerprint: string }).fingerprint, response: { status: 201, headers: {}, body: Buffer.from('{"id":1}') } },
      86_400_000,
    ]);
    expect(res.ended()).toBe(false);
    commit(true);
    await tick();
    expect(res.ended()).toBe(true);
  });

  it('records on the raw response of a Fastify reply', async () => {
    const { interceptor, store, context, res } = setup();
    const reply = { raw: res.raw, code: () => reply };
    await lastValueFrom(await interceptor.intercept(context('http', reply), next(of('x'))));
    res.raw.end('x');
    await tick();
    expect(store.calls.map((c) => c[0])).toEqual(['claim', 'commit']);
  });

  it('frees the key before the error goes on, and records nothing', async () => {
    const { interceptor, store, context, res, held } = setup();
    const end = res.end;
    const boom = new Error('boom');
    const out = await interceptor.intercept(context(), next(throwError(() => boom)));
    let callsAtError: string[] = [];
    const error = await new Promise((resolve) =>
      out.subscribe({
        error: (e) => {
          callsAtError = store.calls.map((c) => c[0] as string);
          resolve(e);
        },
      }),
    );
    expect(error).toBe(boom);
    expect(callsAtError).toEqual(['claim', 'release']);
    expect(res.end).toBe(end);
    expect(held()).toBe(0);
  });

  it.each([
    ['a Readable', () => ({ pipe: () => undefined })],
    ['a StreamableFile', () => new StreamableFile(Buffer.from('x'))],
  ])('releases the key of a handler that returns %s, passes the value on, and records nothing', async (_name, make) => {
    const { interceptor, store, context, res } = setup();
    const value = make();
    const end = res.end;
    const out = await interceptor.intercept(context(), next(of(value)));
    expect(await lastValueFrom(out)).toBe(value);
    await tick();
    expect(store.calls.map((c) => c[0])).toEqual(['claim', 'release']);
    expect(warnings).toHaveBeenCalledWith('response not stored: the handler returned a stream; the key is released');
    expect((warnings.mock.contexts[0] as { context?: string }).context).toBe('Idempotency');
    expect(res.end).toBe(end);
  });

  it('does not take plain values for streams', async () => {
    const { interceptor, store, context } = setup();
    for (const value of [null, 'text', { pipe: 'no' }, 5]) {
      await lastValueFrom(await interceptor.intercept(context(), next(of(value))));
    }
    expect(store.calls.map((c) => c[0])).toEqual(['claim', 'claim', 'claim', 'claim']);
    expect(warnings).not.toHaveBeenCalled();
  });

  it('ignores a stream value once the response was already recorded', async () => {
    const { interceptor, store, context, res } = setup();
    const values = new Subject<unknown>();
    const out = await interceptor.intercept(context(), next(values));
    const seen: unknown[] = [];
    out.subscribe((v) => seen.push(v));
    res.raw.end('done');
    await tick();
    values.next({ pipe: () => undefined });
    values.complete();
    await tick();
    expect(seen).toHaveLength(1);
    expect(store.calls.map((c) => c[0])).toEqual(['claim', 'commit']);
    expect(warnings).not.toHaveBeenCalled();
  });

  it('releases the key of a response written in parts', async () => {
    const { interceptor, store, context, res } = setup();
    await lastValueFrom(await interceptor.intercept(context(), next(of(undefined))));
    res.raw.write('part');
    res.raw.end('rest');
    await tick();
    expect(store.calls.map((c) => c[0])).toEqual(['claim', 'release']);
    expect(warnings).toHaveBeenCalledWith('response not stored: the handler was streamed; the key is released');
  });

  it('releases once when a response written in parts is also a returned stream', async () => {
    const { interceptor, store, context, res } = setup();
    const values = new Subject<unknown>();
    const out = await interceptor.intercept(context(), next(values));
    out.subscribe();
    res.raw.write('part');
    values.next({ pipe: () => undefined });
    values.complete();
    await tick();
    expect(store.calls.map((c) => c[0])).toEqual(['claim', 'release']);
    expect(warnings).toHaveBeenCalledTimes(1);
  });

  it('stops renewing when the subscriber goes away', async () => {
    const { interceptor, context, held } = setup();
    const out = await interceptor.intercept(context(), next(new Subject()));
    const subscription = out.subscribe();
    expect(held()).toBe(1);
    subscription.unsubscribe();
    expect(held()).toBe(0);
  });
});
