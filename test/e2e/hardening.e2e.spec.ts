import { afterEach, describe, expect, it, jest } from '@jest/globals';
import {
  All,
  type ArgumentsHost,
  Body,
  type CallHandler,
  Catch,
  Controller,
  type ExceptionFilter,
  type ExecutionContext,
  Get,
  Injectable,
  Logger,
  type MiddlewareConsumer,
  Module,
  type NestInterceptor,
  type NestModule,
  Post,
  RequestTimeoutException,
  UseFilters,
  VersioningType,
} from '@nestjs/common';
import { APP_FILTER, APP_INTERCEPTOR } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { catchError, defer, from, mergeMap, type Observable, throwError, timeout, TimeoutError } from 'rxjs';
import type { IdempotencyRecord } from '../../lib/stores/index.js';
import {
  type IdempotencyStore,
  IdempotencyModule,
  type IdempotencyModuleOptions,
  Idempotent,
  InMemoryStore,
} from '../../lib/index.js';
import { ADAPTERS, type AdapterName, listen, startApp, useApps } from '../support/app.js';
import { Gate, Runs } from '../support/fixtures.js';
import { sleep, until } from '../support/timing.js';

// Each test here reproduces one defect of docs/hardening.md over HTTP, on a real Nest 12 application.

const startTracked = useApps();
afterEach(() => {
  jest.restoreAllMocks();
});

interface Reply {
  status: number;
  headers: Headers;
  text: string;
}

async function send(base: string, path: string, headers: Record<string, string>, body?: string | Uint8Array): Promise<Reply> {
  const res = await fetch(`${base}${path}`, { method: 'POST', headers, body });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

const json = (key: string, extra: Record<string, string> = {}) => ({
  'idempotency-key': key,
  'content-type': 'application/json',
  ...extra,
});

/** Times out after x-timeout-ms, the TimeoutInterceptor recipe of the Nest docs; other requests pass. */
@Injectable()
class TimeoutInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const ms = Number(context.switchToHttp().getRequest().headers['x-timeout-ms'] ?? 0);
    if (!ms) return next.handle();
    return next.handle().pipe(
      timeout(ms),
      catchError((err) => throwError(() => (err instanceof TimeoutError ? new RequestTimeoutException() : err))),
    );
  }
}

/** Fails after the handler succeeded, asynchronously (an audit write that is down), when asked to. */
@Injectable()
class AuditInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (!context.switchToHttp().getRequest().headers['x-audit-fails']) return next.handle();
    return next.handle().pipe(
      mergeMap(async () => {
        await sleep(5);
        throw new Error('audit log unreachable');
      }),
    );
  }
}

@Catch()
class CatchAll implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse();
    const body = JSON.stringify({ caughtByApp: true });
    if (typeof res.code === 'function') res.code(500).header('content-type', 'application/json').send(body);
    else res.status(500).type('json').send(body);
  }
}

@Controller()
class HardeningController {
  constructor(
    readonly runs: Runs,
    readonly gate: Gate,
  ) {}

  @Post('observable')
  @Idempotent()
  observable() {
    return defer(() => {
      const n = this.runs.hit('observable');
      return from(sleep(400).then(() => ({ charged: n })));
    });
  }

  @Post('slow')
  @Idempotent()
  async slow() {
    const n = this.runs.hit('slow');
    await sleep(300);
    return { ok: n };
  }

  @Post('body')
  @Idempotent()
  body(@Body() body: unknown) {
    return { run: this.runs.hit('body'), seen: body ?? null };
  }

  @Post('gated')
  @Idempotent()
  async gated() {
    const n = this.runs.hit('gated');
    await this.gate.pass();
    return { run: n };
  }

  @Post('above')
  @UseFilters(CatchAll)
  @Idempotent()
  above() {
    return { run: this.runs.hit('above') };
  }

  @Post('below')
  @Idempotent()
  @UseFilters(CatchAll)
  below() {
    return { run: this.runs.hit('below') };
  }

  @All('any')
  @Idempotent()
  any() {
    return { run: this.runs.hit('any') };
  }
}

@Controller()
@UseFilters(CatchAll)
class FilteredController {
  constructor(readonly runs: Runs) {}

  @Post('controller-filter')
  @Idempotent()
  create() {
    return { run: this.runs.hit('controller-filter') };
  }
}

@Controller({ path: 'versioned', version: '1' })
class V1Controller {
  @Post()
  @Idempotent()
  create() {
    return { version: 1 };
  }
}

@Controller({ path: 'versioned', version: '2' })
class V2Controller {
  @Post()
  @Idempotent()
  create() {
    return { version: 2 };
  }
}

/** Sets a per-request header before routing, as request-id middleware does. */
@Module({})
class RequestIdModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    consumer
      .apply((req: { headers: Record<string, string> }, res: { setHeader(n: string, v: string): void }, next: () => void) => {
        res.setHeader('x-request-id', req.headers['x-req'] ?? 'none');
        // A representation header set before the handler, as i18n middleware does.
        if (req.headers['accept-language']) res.setHeader('content-language', req.headers['accept-language']);
        next();
      })
      .forRoutes('*path');
  }
}

async function start(adapter: AdapterName, options: IdempotencyModuleOptions = {}, extra: { providers?: unknown[] } = {}) {
  const app = await startTracked(
    adapter,
    {
      imports: [IdempotencyModule.forRoot(options), RequestIdModule],
      controllers: [HardeningController, FilteredController, V1Controller, V2Controller],
      providers: [
        Runs,
        Gate,
        { provide: APP_INTERCEPTOR, useClass: TimeoutInterceptor },
        { provide: APP_INTERCEPTOR, useClass: AuditInterceptor },
        ...((extra.providers ?? []) as never[]),
      ],
    },
    {
      configure: (a) => {
        a.enableVersioning({ type: VersioningType.HEADER, header: 'x-api-version' });
        a.enableCors({ origin: ['https://a.example', 'https://b.example'] });
      },
    },
  );
  return { app, base: await listen(app), runs: app.get(Runs), gate: app.get(Gate) };
}

/** Sends again while the answer is a 409 (the first request still runs): at most 100 times, 50 ms apart. */
async function settled<T extends { status: number }>(send: () => Promise<T>): Promise<T> {
  let answer = await send();
  for (let i = 0; i < 100 && answer.status === 409; i++) {
    await sleep(50);
    answer = await send();
  }
  return answer;
}

describe.each(ADAPTERS)('hardening (docs/hardening.md) on %s', (adapter) => {
  it('H1. an Observable handler whose client disconnects runs once, and its retry replays its result', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const { base, runs } = await start(adapter, { leaseMs: 1_500 });
    // The client leaves once the handler runs (not after a fixed time, which a busy machine can outrun).
    const leaving = new AbortController();
    const first = fetch(`${base}/observable`, { method: 'POST', headers: json('obs'), body: '{}', signal: leaving.signal });
    await until(() => runs.of('observable') === 1);
    leaving.abort();
    await expect(first).rejects.toThrow();
    const during = await send(base, '/observable', json('obs'), '{}');
    expect(during.status).toBe(409);
    const retry = await settled(() => send(base, '/observable', json('obs'), '{}'));
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(JSON.parse(retry.text)).toEqual({ charged: 1 });
    expect(retry.headers.get('content-type')).toMatch(/^application\/json/);
    expect(runs.of('observable')).toBe(1);
    expect(warn).toHaveBeenCalledWith(expect.stringContaining('HardeningController.observable: the request was abandoned'));
  });

  it("H2. an outer interceptor's timeout is what the first client gets, never what a retry gets", async () => {
    const { base, runs } = await start(adapter);
    const first = await send(base, '/slow', json('t', { 'x-timeout-ms': '150' }), '{}');
    expect(first.status).toBe(408);
    const retry = await settled(() => send(base, '/slow', json('t'), '{}'));
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(JSON.parse(retry.text)).toEqual({ ok: 1 });
    const observable = await send(base, '/observable', json('t-obs', { 'x-timeout-ms': '150' }), '{}');
    expect(observable.status).toBe(408);
    expect(JSON.parse((await settled(() => send(base, '/observable', json('t-obs'), '{}'))).text)).toEqual({ charged: 1 });
    expect(runs.of('slow')).toBe(1);
    expect(runs.of('observable')).toBe(1);
  });

  it('H2. an outer interceptor failing after the handler succeeded is not stored either', async () => {
    const { base, runs } = await start(adapter);
    const first = await send(base, '/body', json('audit', { 'x-audit-fails': '1' }), '{"a":1}');
    expect(first.status).toBe(500);
    const retry = await send(base, '/body', json('audit'), '{"a":1}');
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(JSON.parse(retry.text)).toEqual({ run: 1, seen: { a: 1 } });
    expect(runs.of('body')).toBe(1);
  });

  it.each([
    ['text/plain', 'a', 'b'],
    ['application/xml', '<a/>', '<b/>'],
    ['application/vnd.api+json', '{"a":1}', '{"a":2}'],
    [undefined, 'a', 'b'],
  ])('H3. a %s body the fingerprint cannot see is never ignored: refused, or a 422 for another body', async (type, a, b) => {
    const { base, runs } = await start(adapter);
    const headers = (): Record<string, string> => ({
      'idempotency-key': `body-${type}`,
      ...(type ? { 'content-type': type } : {}),
    });
    const encode = (s: string) => (type ? s : new TextEncoder().encode(s)); // a Uint8Array goes without a content type
    const first = await send(base, '/body', headers(), encode(a));
    if (first.status === 201) {
      const second = await send(base, '/body', headers(), encode(b));
      expect(second.status).toBe(422);
      expect(runs.of('body')).toBe(1);
    } else {
      expect(first.status).toBe(415);
      expect(runs.of('body')).toBe(0);
    }
  });

  it('H4. replays and the module errors come out right under a catch-all filter at every level and order', async () => {
    const { base, runs } = await start(adapter, {}, { providers: [{ provide: APP_FILTER, useClass: CatchAll }] });
    for (const path of ['/above', '/below', '/controller-filter', '/body']) {
      const first = await send(base, path, json(`f${path}`), '{}');
      expect(first.status).toBe(201);
      const replay = await send(base, path, json(`f${path}`), '{}');
      expect([replay.status, replay.headers.get('idempotent-replayed'), replay.text]).toEqual([201, 'true', first.text]);
      const reused = await send(base, path, json(`f${path}`), '{"other":1}');
      expect([reused.status, reused.text]).toEqual([422, '{"error":"idempotency-key was already used for a different request"}']);
      const missing = await send(base, path, { 'content-type': 'application/json' }, '{}');
      expect([missing.status, missing.text]).toEqual([400, '{"error":"idempotency-key header is required"}']);
    }
    expect(runs.of('above') + runs.of('below') + runs.of('controller-filter') + runs.of('body')).toBe(4);
  });

  it('H6. bodies that differ only inside a "__proto__" key are different requests', async () => {
    const { base, runs } = await start(adapter);
    const first = await send(base, '/body', json('proto'), '{"__proto__":{"amount":1}}');
    const second = await send(base, '/body', json('proto'), '{"__proto__":{"amount":1000}}');
    // Express parses the key as data; Fastify refuses such a body (400).
    if (first.status === 201) expect(second.status).toBe(422);
    else expect([first.status, second.status]).toEqual([400, 400]);
    expect(runs.of('body')).toBeLessThanOrEqual(1);
  });

  it('H7. the same key sent to another handler (a header version) is a 422', async () => {
    const { base } = await start(adapter);
    const v1 = await send(base, '/versioned', json('ver', { 'x-api-version': '1' }), '{}');
    expect(JSON.parse(v1.text)).toEqual({ version: 1 });
    const v2 = await send(base, '/versioned', json('ver', { 'x-api-version': '2' }), '{}');
    expect(v2.status).toBe(422);
  });

  it("H8. a replay keeps the retry's own middleware headers (CORS origin, request id)", async () => {
    const { base } = await start(adapter);
    const first = await send(base, '/body', json('cors', { origin: 'https://a.example', 'x-req': 'r-1' }), '{}');
    expect(first.headers.get('access-control-allow-origin')).toBe('https://a.example');
    expect(first.headers.get('x-request-id')).toBe('r-1');
    const retry = await send(base, '/body', json('cors', { origin: 'https://b.example', 'x-req': 'r-2' }), '{}');
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.headers.get('access-control-allow-origin')).toBe('https://b.example');
    expect(retry.headers.get('x-request-id')).toBe('r-2');
    expect(retry.text).toBe(first.text);
    // The module's own errors keep them too, so a browser can read a 409 or 422.
    const reused = await send(base, '/body', json('cors', { origin: 'https://b.example', 'x-req': 'r-3' }), '{"x":1}');
    expect([reused.status, reused.headers.get('access-control-allow-origin'), reused.headers.get('x-request-id')]).toEqual([
      422,
      'https://b.example',
      'r-3',
    ]);
  });

  // H26 (issue 22 item 12): the replay carried the retry's Content-Language over the first response's body.
  it('H26. representation headers a middleware set before the handler are stored with the body they describe', async () => {
    const { base } = await start(adapter);
    const first = await send(base, '/body', json('lang', { 'accept-language': 'de', 'x-req': 'r-1' }), '{}');
    expect(first.headers.get('content-language')).toBe('de');
    const retry = await send(base, '/body', json('lang', { 'accept-language': 'fr', 'x-req': 'r-2' }), '{}');
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.headers.get('content-language')).toBe('de');
    // A request-scoped header stays the retry's own.
    expect(retry.headers.get('x-request-id')).toBe('r-2');
    expect(retry.text).toBe(first.text);
  });

  it('H9. a duration past what a timer can wait fails the start, naming the option and its limit', async () => {
    await expect(start(adapter, { leaseMs: 6.5e9 })).rejects.toThrow(
      'IdempotencyModule: leaseMs must be an integer from 3 to 2147483647, got 6500000000',
    );
  });

  it('H10. InMemoryStore never evicts a claim in flight; with nothing evictable a new key gets 503', async () => {
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const { base, runs, gate } = await start(adapter, { store: new InMemoryStore({ maxEntries: 10 }) });
    gate.close();
    const slow = send(base, '/gated', json('held'), '{}');
    while (runs.of('gated') === 0) await sleep(5);
    for (let i = 0; i < 10; i++) expect((await send(base, '/body', json(`other-${i}`), '{}')).status).toBe(201);
    const duplicate = await send(base, '/gated', json('held'), '{}');
    expect(duplicate.status).toBe(409);
    gate.release();
    expect((await slow).status).toBe(201);
    expect(runs.of('gated')).toBe(1);

    const { base: full, runs: fullRuns, gate: fullGate } = await start(adapter, { store: new InMemoryStore({ maxEntries: 2 }) });
    fullGate.close();
    const a = send(full, '/gated', json('a'), '{}');
    const b = send(full, '/gated', json('b'), '{}');
    while (fullRuns.of('gated') < 2) await sleep(5);
    const c = await send(full, '/body', json('c'), '{}');
    expect([c.status, c.headers.get('retry-after'), c.text]).toEqual([
      503,
      '1',
      '{"error":"idempotency store unavailable; retry shortly"}',
    ]);
    expect(errors).toHaveBeenCalledWith(expect.stringContaining('InMemoryStore is full'));
    fullGate.release();
    expect([(await a).status, (await b).status]).toEqual([201, 201]);
    expect(fullRuns.of('body')).toBe(0);
  });

  it('H12. @Idempotent() on a safe-method route fails the start; an @All() route passes safe methods through', async () => {
    @Controller()
    class GetController {
      @Get('g')
      @Idempotent()
      get() {
        return {};
      }
    }
    await expect(startApp(adapter, { imports: [IdempotencyModule.forRoot()], controllers: [GetController] })).rejects.toThrow(
      '@Idempotent() on GetController.get(): GET, HEAD, OPTIONS and other safe methods change nothing',
    );
    const { base, runs } = await start(adapter);
    for (let i = 0; i < 2; i++) expect((await fetch(`${base}/any`, { headers: { 'idempotency-key': 'safe' } })).status).toBe(200);
    expect((await fetch(`${base}/any`, { method: 'HEAD', headers: { 'idempotency-key': 'safe' } })).status).toBe(200);
    expect(runs.of('any')).toBe(3);
    await send(base, '/any', json('unsafe'), '{}');
    expect((await send(base, '/any', json('unsafe'), '{}')).headers.get('idempotent-replayed')).toBe('true');
    expect(runs.of('any')).toBe(4);
  });

  it('H13. an identity resolver returning an empty scope is a 500 with a small JSON body, the handler does not run', async () => {
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const { base, runs } = await start(adapter, { identity: () => '' });
    const res = await send(base, '/body', json('k'), '{}');
    expect([res.status, res.text]).toEqual([500, '{"error":"the caller scope of this request could not be resolved"}']);
    expect(runs.of('body')).toBe(0);
    expect(errors).toHaveBeenCalledWith(
      'HardeningController.body: the identity resolver returned an empty string, not a scope; answering 500',
    );
  });

  it('H14. an unknown option fails the start naming it and the nearest valid one; module-level keys say so', async () => {
    await expect(start(adapter, { stores: new InMemoryStore() } as never)).rejects.toThrow(
      'IdempotencyModule: unknown option "stores" (did you mean store?)',
    );
    const async = IdempotencyModule.forRootAsync({ useFactory: () => ({ isGlobal: false }) as never });
    await expect(startApp(adapter, { imports: [async], controllers: [] })).rejects.toThrow(
      'IdempotencyModule: isGlobal is an option of forRootAsync() itself',
    );
  });

  it('H15. a handler that never finishes keeps its key for maxHoldMs only, then the lease lapses', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const { base, runs, gate } = await start(adapter, { leaseMs: 150, maxHoldMs: 300 });
    gate.close();
    const stuck = send(base, '/gated', json('stuck'), '{}');
    while (runs.of('gated') === 0) await sleep(5);
    expect((await send(base, '/gated', json('stuck'), '{}')).status).toBe(409);
    // Retries until one takes the key over; that one waits at the gate too, so none is awaited here.
    const retries: Promise<Reply>[] = [];
    for (let i = 0; i < 40 && runs.of('gated') < 2; i++) {
      retries.push(send(base, '/gated', json('stuck'), '{}'));
      await sleep(50);
    }
    expect(runs.of('gated')).toBe(2); // taken over: held for maxHoldMs, then one lease
    expect(warn).toHaveBeenCalledWith(
      expect.stringContaining('HardeningController.gated: the handler has held its key for 300 ms (maxHoldMs)'),
    );
    gate.release();
    const statuses = (await Promise.all([stuck, ...retries])).map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(2);
    expect(statuses.filter((s) => s !== 201 && s !== 409)).toEqual([]);
  });

  it('H15. the lease is renewed until the commit has settled', async () => {
    const inner = new InMemoryStore();
    const slowCommit: IdempotencyStore = {
      claim: (k, c) => inner.claim(k, c),
      release: (k, o) => inner.release(k, o),
      renew: (k, o, l) => inner.renew(k, o, l),
      async commit(k: string, o: string, r: IdempotencyRecord, t: number) {
        await sleep(400); // several leases
        return inner.commit(k, o, r, t);
      },
    };
    const { base, runs } = await start(adapter, { store: slowCommit, leaseMs: 120 });
    expect((await send(base, '/body', json('slow-commit'), '{}')).status).toBe(201);
    const retry = await send(base, '/body', json('slow-commit'), '{}');
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(runs.of('body')).toBe(1);
  });
});

describe('hardening (docs/hardening.md) on express only', () => {
  it('H3. a text body is fingerprinted once the application registers a parser for it', async () => {
    const app = await startTracked(
      'express',
      { imports: [IdempotencyModule.forRoot()], controllers: [HardeningController], providers: [Runs, Gate] },
      { configure: (a) => (a as NestExpressApplication).useBodyParser('text') },
    );
    const base = await listen(app);
    const headers = { 'idempotency-key': 'txt', 'content-type': 'text/plain' };
    expect((await send(base, '/body', headers, 'a')).status).toBe(201);
    expect((await send(base, '/body', headers, 'a')).headers.get('idempotent-replayed')).toBe('true');
    expect((await send(base, '/body', headers, 'b')).status).toBe(422);
  });

  it('H3. the 415 names the fix and echoes nothing the client sent', async () => {
    const { base } = await start('express');
    const res = await send(base, '/body', { 'idempotency-key': 'k', 'content-type': 'application/x-secret-type' }, 'card=4111');
    expect(res.status).toBe(415);
    expect(JSON.parse(res.text)).toEqual({
      error:
        "request body is read by no body parser, so it cannot be checked against the key; register a parser for its media type (e.g. app.useBodyParser('text'))",
    });
    expect(res.text).not.toMatch(/secret|4111/);
  });
});
