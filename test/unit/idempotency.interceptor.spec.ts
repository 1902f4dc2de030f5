import { describe, expect, it } from '@jest/globals';
import { type CallHandler, HttpException, StreamableFile } from '@nestjs/common';
import { lastValueFrom, Observable, of, Subject, throwError } from 'rxjs';
import { IdempotencyException, type IdempotencyEvent, IdempotencyKey } from '../../lib/index.js';
import { IdempotentReplay } from '../../lib/shared/exceptions/idempotent-replay.exception.js';
import { IDEMPOTENT_ROUTE_METADATA } from '../../lib/shared/idempotency.constants.js';
import { keyOf } from '../../lib/transports/http/request-key.store.js';
import { IdempotencyInterceptor } from '../../lib/nest/idempotency.interceptor.js';
import { httpContext } from '../support/contexts.js';
import { FakeResponse } from '../support/fake-response.js';
import { spyOnLogger } from '../support/logger.js';
import { createProtocol, destroyProtocolsAfterEach } from '../support/protocol.js';
import { tick, until } from '../support/timing.js';

function setup(routeOptions: object = {}, moduleOptions: Parameters<typeof createProtocol>[0] = {}, takesKey = true) {
  const { store, service, leases, interceptor, observer } = createProtocol(moduleOptions);
  // A class per setup: the registry resolves each handler once.
  class Pay {
    create(@IdempotencyKey() _key?: string) {}
  }
  class Plain {
    create() {}
  }
  const create = takesKey ? Pay.prototype.create : Plain.prototype.create;
  Reflect.defineMetadata(IDEMPOTENT_ROUTE_METADATA, routeOptions, create);
  const res = new FakeResponse();
  res.statusCode = 201;
  const req: Record<string | symbol, unknown> = {
    method: 'POST',
    url: '/pay',
    headers: { 'idempotency-key': 'k' },
    body: { a: 1 },
  };
  const context = (type = 'http', response: object = res) =>
    httpContext({ type, controller: takesKey ? Pay : Plain, handler: create, request: req, response });
  const held = () => (leases as unknown as { held: Set<unknown> }).held.size;
  const ops = () => store.calls.map((c) => c[0]);
  const committed = () => store.calls.find((c) => c[0] === 'commit')?.[3] as { response: unknown } | undefined;
  return { store, service, leases, interceptor, observer, res, req, context, held, ops, committed };
}

const next = (source: Observable<unknown>): CallHandler => ({ handle: () => source });

/** Recording has stopped: end() goes straight out, with no commit waited for or made. */
async function endsUnrecorded(res: FakeResponse, store: { calls: unknown[][] }) {
  const before = store.calls.length;
  res.raw.end('late');
  expect(res.ended()).toBe(true);
  await tick();
  expect(store.calls.length).toBe(before);
}

describe('IdempotencyInterceptor', () => {
  const log = spyOnLogger();
  destroyProtocolsAfterEach();
  it('names IdempotencyModule when it is not imported (Nest would list an injection token)', () => {
    const { routes } = createProtocol();
    expect(() => new IdempotencyInterceptor(undefined as never, routes)).toThrow(
      '@Idempotent() needs IdempotencyModule: add IdempotencyModule.forRoot() (or forRootAsync()) to the imports of your AppModule',
    );
    expect(() => new IdempotencyInterceptor(new Map(), undefined as never)).toThrow(
      '@Idempotent() needs IdempotencyModule: add IdempotencyModule.forRoot() (or forRootAsync()) to the imports of your AppModule',
    );
    expect(() => new IdempotencyInterceptor(new Map(), routes)).not.toThrow();
  });

  it('leaves the key beside the request only for a handler that takes @IdempotencyKey()', async () => {
    const { interceptor, context, req, res } = setup({}, {}, false);
    const out = await interceptor.intercept(context(), next(of({ id: 1 })));
    expect(keyOf(req)).toBeUndefined();
    res.end('{"id":1}');
    expect(await lastValueFrom(out)).toEqual({ id: 1 });
  });

  it('leaves contexts other than HTTP, messages and GraphQL (WebSockets) and safe methods (an @All() route) alone', async () => {
    const { interceptor, store, context, req } = setup();
    const source = of(1);
    expect(await interceptor.intercept(context('ws'), next(source))).toBe(source);
    for (const method of ['GET', 'HEAD', 'OPTIONS', 'TRACE', 'SEARCH', 'PROPFIND', 'QUERY']) {
      req.method = method;
      expect(await interceptor.intercept(context(), next(source))).toBe(source);
    }
    expect(store.calls).toEqual([]);
  });

  it('passes a request without a key straight through on a pass-through route', async () => {
    const { interceptor, store, context, req, held } = setup({ missingHeader: 'pass-through' });
    req.headers = {};
    const source = of(1);
    expect(await interceptor.intercept(context(), next(source))).toBe(source);
    expect(store.calls).toEqual([]);
    expect(keyOf(req)).toBeUndefined();
    expect(held()).toBe(0);
  });

  it('claims, hands the key to @IdempotencyKey(), commits what end() sends before it goes out, and renews until the commit settles', async () => {
    const { interceptor, store, context, req, res, held } = setup();
    res.setHeader('x-request-id', 'r-1');
    const out = await interceptor.intercept(context(), next(of({ id: 1 })));
    expect(store.calls.map((c) => c[0])).toEqual(['claim']);
    expect(keyOf(req)).toBe('k');
    expect(held()).toBe(1);
    expect(await lastValueFrom(out)).toEqual({ id: 1 });
    expect(held()).toBe(1);
    let commit!: (stored: boolean) => void;
    store.commitAnswer = () => new Promise((r) => (commit = r));
    res.setHeader('x-set', 'later');
    res.raw.end('{"id":1}');
    await tick();
    expect(store.calls[1]).toEqual([
      'commit',
      'idem:%:k',
      (store.calls[0][2] as { owner: string }).owner,
      {
        fingerprint: (store.calls[0][2] as { fingerprint: string }).fingerprint,
        response: { status: 201, headers: { 'x-set': 'later' }, body: Buffer.from('{"id":1}') },
      },
      86_400_000,
    ]);
    expect(res.ended()).toBe(false);
    expect(held()).toBe(1);
    commit(true);
    await tick();
    expect(res.ended()).toBe(true);
    expect(held()).toBe(0);
  });

  it("records on the raw response of a Fastify reply, leaving out the reply's headers set before the handler", async () => {
    const { interceptor, store, context, res } = setup();
    const reply = { raw: res.raw, code: () => reply, getHeaders: () => ({ vary: 'Origin' }) };
    await lastValueFrom(await interceptor.intercept(context('http', reply), next(of('x'))));
    res.raw.writeHead(201, { vary: 'Origin', 'content-type': 'text/plain' });
    res.raw.end('x');
    await tick();
    expect(store.calls.map((c) => c[0])).toEqual(['claim', 'commit']);
    expect(store.calls[1][3]).toMatchObject({ response: { status: 201, headers: { 'content-type': 'text/plain' } } });
  });

  it('frees the key before the error goes on, and records nothing', async () => {
    const { interceptor, store, context, res, held } = setup();
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
    await endsUnrecorded(res, store);
    expect(held()).toBe(0);
    // The teardown that follows an error is no abandoned request.
    expect(log.warnings).not.toHaveBeenCalled();
  });

  it.each([
    ['a Readable', () => ({ pipe: () => undefined })],
    ['a StreamableFile', () => new StreamableFile(Buffer.from('x'))],
  ])('releases the key of a handler that returns %s, passes the value on, and records nothing', async (_name, make) => {
    const { interceptor, store, context, res, held } = setup();
    const value = make();
    const out = await interceptor.intercept(context(), next(of(value)));
    expect(await lastValueFrom(out)).toBe(value);
    await tick();
    expect(store.calls.map((c) => c[0])).toEqual(['claim', 'release']);
    expect(log.warnings).toHaveBeenCalledWith(
      'Pay.create: response not stored: the handler returned a stream; the key is released',
    );
    expect((log.warnings.mock.contexts[0] as { context?: string }).context).toBe('Idempotency');
    await endsUnrecorded(res, store);
    expect(held()).toBe(0);
  });

  it('does not take plain values for streams', async () => {
    const { interceptor, store, context } = setup();
    for (const value of [null, 'text', { pipe: 'no' }, 5]) {
      await lastValueFrom(await interceptor.intercept(context(), next(of(value))));
    }
    expect(store.calls.map((c) => c[0])).toEqual(['claim', 'claim', 'claim', 'claim']);
    expect(log.warnings).not.toHaveBeenCalled();
  });

  it('releases the key of a response written in parts', async () => {
    const { interceptor, store, context, res } = setup();
    await lastValueFrom(await interceptor.intercept(context(), next(of(undefined))));
    res.raw.write('part');
    res.raw.end('rest');
    await tick();
    expect(store.calls.map((c) => c[0])).toEqual(['claim', 'release']);
    expect(log.warnings).toHaveBeenCalledWith('Pay.create: response not stored: the handler was streamed; the key is released');
  });

  it('reports a key given up on (a response written in parts) as not-stored, with no status', async () => {
    const events: IdempotencyEvent[] = [];
    const { interceptor, observer, context, res } = setup({}, { events: (e) => void events.push(e) });
    await observer.onModuleInit();
    await lastValueFrom(await interceptor.intercept(context(), next(of(undefined))));
    res.raw.write('part');
    res.raw.end('rest');
    await until(() => events.length === 1);
    expect(events.map((e) => [e.outcome, e.status])).toEqual([['not-stored', undefined]]);
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
    expect(log.warnings).toHaveBeenCalledTimes(1);
  });
});

describe('IdempotencyInterceptor: a chain torn down or answered before the handler finished', () => {
  const log = spyOnLogger();
  destroyProtocolsAfterEach();
  it('lets the handler finish after the subscriber goes away (client gone, outer timeout) and stores its own result', async () => {
    const { interceptor, context, res, held, ops, committed } = setup();
    const handler = new Subject<unknown>();
    const out = await interceptor.intercept(context(), next(handler));
    const subscription = out.subscribe();
    subscription.unsubscribe();
    expect(handler.observed).toBe(true);
    expect(held()).toBe(1);
    expect(log.warnings).toHaveBeenCalledWith(
      'Pay.create: the request was abandoned (client gone, or an outer timeout or error) before the handler finished; it runs to completion and its own result is stored',
    );
    // What an outer timeout answers is not the handler's result: it is not recorded.
    res.statusCode = 408;
    res.raw.end('{"statusCode":408}');
    await tick();
    expect(ops()).toEqual(['claim']);
    handler.next({ charged: 1 });
    handler.complete();
    await tick();
    expect(ops()).toEqual(['claim', 'commit']);
    // The response had gone out: the status is the one set before the handler ran.
    expect(committed()!.response).toEqual({
      status: 201,
      headers: { 'content-type': 'application/json; charset=utf-8' },
      body: Buffer.from('{"charged":1}'),
    });
    expect(held()).toBe(0);
  });

  it('stores what the handler set when nothing went out (Nest sends nothing to a client that is gone)', async () => {
    const { interceptor, context, res, committed } = setup();
    const handler = new Subject<unknown>();
    (await interceptor.intercept(context(), next(handler))).subscribe().unsubscribe();
    res.statusCode = 202;
    res.setHeader('location', '/p/1');
    handler.next('queued');
    handler.complete();
    await tick();
    expect(committed()!.response).toEqual({
      status: 202,
      headers: { location: '/p/1', 'content-type': 'text/html; charset=utf-8' },
      body: Buffer.from('queued'),
    });
  });

  it('releases the key when the abandoned handler fails or returns a stream', async () => {
    for (const finish of [
      (h: Subject<unknown>) => h.error(new Error('declined')),
      (h: Subject<unknown>) => {
        h.next({ pipe: () => undefined });
        h.complete();
      },
      (h: Subject<unknown>) => {
        h.next(new StreamableFile(Buffer.from('x')));
        h.next({ not: 'a stream' }); // the last value decides
        h.next({ pipe: () => undefined });
        h.complete();
      },
    ]) {
      const { interceptor, context, ops, held } = setup();
      const handler = new Subject<unknown>();
      (await interceptor.intercept(context(), next(handler))).subscribe({ error: () => undefined }).unsubscribe();
      finish(handler);
      await tick();
      expect(ops()).toEqual(['claim', 'release']);
      expect(held()).toBe(0);
    }
  });

  it('does not store an answer sent from outside before the handler finished, but the result that follows', async () => {
    const { interceptor, context, res, ops, committed } = setup();
    const handler = new Subject<unknown>();
    const seen: unknown[] = [];
    (await interceptor.intercept(context(), next(handler))).subscribe((v) => seen.push(v));
    res.statusCode = 503;
    res.raw.end('timed out');
    await tick();
    expect(res.ended()).toBe(true);
    expect(ops()).toEqual(['claim']);
    expect(log.warnings).toHaveBeenCalledWith(
      'Pay.create: a response was sent before the handler finished; it runs to completion and its own result is stored',
    );
    handler.next({ ok: true });
    handler.complete();
    await tick();
    expect(seen).toEqual([{ ok: true }]);
    expect(committed()!.response).toMatchObject({ status: 201, body: Buffer.from('{"ok":true}') });
  });

  it("stores the handler's result, not the error an outer layer answered with after it succeeded", async () => {
    const { interceptor, context, res, committed } = setup();
    res.setHeader('x-handler', 'set');
    await lastValueFrom(await interceptor.intercept(context(), next(of({ id: 7 }))));
    res.statusCode = 500;
    res.setHeader('content-type', 'application/json');
    res.raw.end('{"statusCode":500,"message":"Internal server error"}');
    await tick();
    expect(committed()!.response).toEqual({
      status: 201,
      headers: { 'content-type': 'application/json; charset=utf-8' },
      body: Buffer.from('{"id":7}'),
    });
  });

  it('stores what left the server when an outer layer changed the status to another success', async () => {
    const { interceptor, context, res, committed } = setup();
    await lastValueFrom(await interceptor.intercept(context(), next(of({ id: 7 }))));
    res.statusCode = 200;
    res.raw.end('{"data":{"id":7}}');
    await tick();
    expect(committed()!.response).toMatchObject({ status: 200, body: Buffer.from('{"data":{"id":7}}') });
  });

  it('takes an outer 400 after a success for a failure too', async () => {
    const { interceptor, context, res, committed } = setup();
    await lastValueFrom(await interceptor.intercept(context(), next(of({ id: 7 }))));
    res.statusCode = 400;
    res.raw.end('{"statusCode":400}');
    await tick();
    expect(committed()!.response).toMatchObject({ status: 201, body: Buffer.from('{"id":7}') });
  });

  it('renders a string as Fastify would, for a Fastify reply', async () => {
    const { interceptor, context, res, committed } = setup();
    const reply = { raw: res.raw, code: () => reply, getHeaders: () => res.getHeaders() };
    const handler = new Subject<unknown>();
    (await interceptor.intercept(context('http', reply), next(handler))).subscribe().unsubscribe();
    handler.next('done');
    handler.complete();
    await tick();
    expect(committed()!.response).toEqual({
      status: 201,
      headers: { 'content-type': 'text/plain; charset=utf-8' },
      body: Buffer.from('done'),
    });
  });

  it('gives a key up once, and warns of an abandoned request once', async () => {
    const { interceptor, context, res, ops } = setup();
    const handler = new Subject<unknown>();
    const subscription = (await interceptor.intercept(context(), next(handler))).subscribe();
    res.raw.end('outer answer'); // sent from outside first
    subscription.unsubscribe(); // then torn down
    handler.next({ pipe: () => undefined });
    handler.complete();
    await tick();
    expect(ops()).toEqual(['claim', 'release']);
    expect(log.warnings.mock.calls.map((c: unknown[]) => c[0])).toEqual([
      'Pay.create: a response was sent before the handler finished; it runs to completion and its own result is stored',
      'Pay.create: response not stored: the handler returned a stream; the key is released',
    ]);
  });

  it('stores an error status the handler chose itself', async () => {
    const { interceptor, context, res, committed } = setup();
    res.statusCode = 402;
    await lastValueFrom(await interceptor.intercept(context(), next(of({ declined: true }))));
    res.raw.end('{"declined":true,"wrapped":1}');
    await tick();
    expect(committed()!.response).toMatchObject({ status: 402, body: Buffer.from('{"declined":true,"wrapped":1}') });
  });
});

describe("IdempotencyInterceptor: the module's own answers", () => {
  spyOnLogger();
  destroyProtocolsAfterEach();
  it('writes a replay and locks the response before throwing it on', async () => {
    const { interceptor, store, context, res } = setup();
    const stored = { status: 201, headers: { 'content-type': 'application/json' }, body: Buffer.from('{"id":1}') };
    store.claimAnswer = async () => ({ state: 'completed', record: { fingerprint: await fingerprintOf(), response: stored } });
    const thrown = await interceptor.intercept(context(), next(of(1))).catch((e: unknown) => e);
    expect(thrown).toBeInstanceOf(IdempotentReplay);
    expect(res.statusCode).toBe(201);
    expect(res.getHeaders()).toEqual({ 'content-type': 'application/json', 'idempotent-replayed': 'true' });
    expect(res.calls).toEqual([{ method: 'end', args: [stored.body] }]);
    // A catch-all filter answering the exception changes nothing.
    res.raw.setHeader('content-type', 'text/html');
    res.raw.end('{"statusCode":500}');
    expect(res.calls).toHaveLength(1);
    expect(res.getHeader('content-type')).toBe('application/json');
  });

  it('writes its errors as small JSON with their headers', async () => {
    const { interceptor, store, context, res } = setup();
    store.claimAnswer = async () => ({ state: 'in-flight', fingerprint: await fingerprintOf() });
    const thrown = await interceptor.intercept(context(), next(of(1))).catch((e: unknown) => e);
    expect(thrown).toBeInstanceOf(IdempotencyException);
    expect(res.statusCode).toBe(409);
    expect(res.getHeaders()).toEqual({ 'content-type': 'application/json; charset=utf-8', 'retry-after': '1' });
    expect(res.calls).toEqual([{ method: 'end', args: [Buffer.from('{"error":"idempotency-key in-flight; retry shortly"}')] }]);
  });

  it('answers a key with 503 shutting-down and Retry-After once the app drains, without touching the store', async () => {
    const { interceptor, store, context, res, leases } = setup();
    await leases.drain();
    const thrown = await interceptor.intercept(context(), next(of(1))).catch((e: unknown) => e);
    expect([(thrown as IdempotencyException).code, res.statusCode]).toEqual(['shutting-down', 503]);
    expect(res.getHeaders()).toEqual({ 'content-type': 'application/json; charset=utf-8', 'retry-after': '1' });
    expect(res.calls).toEqual([{ method: 'end', args: [Buffer.from('{"error":"the server is shutting down; retry shortly"}')] }]);
    expect(store.calls).toEqual([]);
  });

  it("leaves an application's own error to the application's filters", async () => {
    const { interceptor, context, res } = setup({ identity: () => Promise.reject(new HttpException('who?', 401)) });
    const thrown = await interceptor.intercept(context(), next(of(1))).catch((e: unknown) => e);
    expect((thrown as HttpException).getStatus()).toBe(401);
    expect(res.calls).toEqual([]);
  });
});

/** The fingerprint the interceptor claims with, read from a first claim on a fresh store. */
async function fingerprintOf(): Promise<string> {
  const probe = setup();
  await probe.interceptor.intercept(probe.context(), next(of(1)));
  return (probe.store.calls[0][2] as { fingerprint: string }).fingerprint;
}
