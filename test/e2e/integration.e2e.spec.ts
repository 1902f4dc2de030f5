import { describe, expect, it } from '@jest/globals';
import {
  type ArgumentsHost,
  Catch,
  type CallHandler,
  Controller,
  type ExceptionFilter,
  type ExecutionContext,
  Inject,
  Injectable,
  Module,
  type NestInterceptor,
  Post,
  Res,
  Sse,
  StreamableFile,
} from '@nestjs/common';
import { APP_FILTER, APP_INTERCEPTOR } from '@nestjs/core';
import { Readable } from 'node:stream';
import { interval, map, type Observable } from 'rxjs';
import request from 'supertest';
import {
  IdempotencyKey,
  type IdempotencyModuleOptions,
  IdempotencyModule,
  type IdempotencyStore,
  Idempotent,
  InMemoryStore,
} from '../../lib/index.js';
import type { IdempotencyRecord } from '../../lib/stores/index.js';
import { ADAPTERS, startApp, useApps } from '../support/app.js';
import { Config, ConfigModule, Gate, OptionsFactory, Runs, TestController } from '../support/fixtures.js';
import { sleep } from '../support/timing.js';

const start = useApps();

/** Catches everything, as many applications do, and answers with its own shape. */
@Catch()
class CatchAllFilter implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse();
    const status = (exception as { getStatus?: () => number }).getStatus?.() ?? 500;
    const body = JSON.stringify({ caughtByApp: true, status });
    if (typeof res.code === 'function') res.code(status).header('content-type', 'application/json').send(body);
    else res.status(status).type('json').send(body);
  }
}

/** Wraps every response body, as "transform" interceptors do. */
@Injectable()
class WrapInterceptor implements NestInterceptor {
  intercept(_: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(map((data) => ({ data, wrappedAt: 'outer' })));
  }
}

/** Hides a field the way ClassSerializerInterceptor does with @Exclude(). */
@Injectable()
class RedactInterceptor implements NestInterceptor {
  intercept(_: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(map((data) => ({ ...(data as object), body: undefined })));
  }
}

describe.each(ADAPTERS)('integration on %s', (adapter) => {
  it('B8. releases the key on a thrown error even when the app has a global catch-all filter', async () => {
    const app = await start(adapter, {
      imports: [IdempotencyModule.forRoot()],
      controllers: [TestController],
      providers: [Runs, Gate, { provide: APP_FILTER, useClass: CatchAllFilter }],
    });
    const a = await request(app.getHttpServer()).post('/throws').set('Idempotency-Key', 'k1');
    const b = await request(app.getHttpServer()).post('/throws').set('Idempotency-Key', 'k1');
    expect(a.body).toEqual({ caughtByApp: true, status: 400 });
    expect(b.body).toEqual({ caughtByApp: true, status: 400 });
    expect(app.get(Runs).of('throws')).toBe(2);
    // Our own answers are still ours: the method-level filter wins over the global one.
    const missing = await request(app.getHttpServer()).post('/payments').send({});
    expect(missing.body).toEqual({ error: 'idempotency-key header is required' });
    await request(app.getHttpServer()).post('/payments').set('Idempotency-Key', 'k2').send({});
    const replay = await request(app.getHttpServer()).post('/payments').set('Idempotency-Key', 'k2').send({});
    expect(replay.headers['idempotent-replayed']).toBe('true');
  });

  it('replays what left the server, after outer interceptors shaped it', async () => {
    const app = await start(adapter, {
      imports: [IdempotencyModule.forRoot()],
      controllers: [TestController],
      providers: [
        Runs,
        Gate,
        { provide: APP_INTERCEPTOR, useClass: WrapInterceptor },
        { provide: APP_INTERCEPTOR, useClass: RedactInterceptor },
      ],
    });
    const a = await request(app.getHttpServer()).post('/payments').set('Idempotency-Key', 'w').send({ secret: 's3cr3t' });
    const b = await request(app.getHttpServer()).post('/payments').set('Idempotency-Key', 'w').send({ secret: 's3cr3t' });
    expect(a.body.wrappedAt).toBe('outer');
    expect(a.text).not.toContain('s3cr3t');
    expect(b.text).toBe(a.text);
    expect(app.get(Runs).of('payments')).toBe(1);
  });

  it('B12. commits the record before the first response leaves', async () => {
    const inner = new InMemoryStore();
    const events: string[] = [];
    const slowCommit: IdempotencyStore = {
      claim: (k, c) => inner.claim(k, c),
      release: (k, o) => inner.release(k, o),
      renew: (k, o, l) => inner.renew(k, o, l),
      async commit(k: string, o: string, r: IdempotencyRecord, t: number) {
        await sleep(50);
        events.push('committed');
        return inner.commit(k, o, r, t);
      },
    };
    const app = await start(adapter, {
      imports: [IdempotencyModule.forRoot({ store: slowCommit })],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    const first = await request(app.getHttpServer()).post('/payments').set('Idempotency-Key', 'c').send({});
    events.push('response received');
    expect(events).toEqual(['committed', 'response received']);
    const retry = await request(app.getHttpServer()).post('/payments').set('Idempotency-Key', 'c').send({});
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.text).toBe(first.text);
  });

  it('serves controllers of feature modules, with the module global at the root or imported where used', async () => {
    @Module({ controllers: [TestController], providers: [Runs, Gate] })
    class GlobalFeature {}
    @Module({ imports: [IdempotencyModule.forRoot({ isGlobal: false })], controllers: [TestController], providers: [Runs, Gate] })
    class LocalFeature {}
    for (const meta of [{ imports: [IdempotencyModule.forRoot(), GlobalFeature] }, { imports: [LocalFeature] }]) {
      const app = await start(adapter, meta);
      await request(app.getHttpServer()).post('/payments').set('Idempotency-Key', 'f').send({});
      const retry = await request(app.getHttpServer()).post('/payments').set('Idempotency-Key', 'f').send({});
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(app.get(Runs).of('payments')).toBe(1);
    }
  });

  it('B12. every forRoot() without a cache gets a store of its own', async () => {
    const meta = { imports: [IdempotencyModule.forRoot()], controllers: [TestController], providers: [Runs, Gate] };
    const one = await start(adapter, meta);
    const two = await start(adapter, { ...meta, imports: [IdempotencyModule.forRoot()] });
    await request(one.getHttpServer()).post('/payments').set('Idempotency-Key', 'same').send({});
    const other = await request(two.getHttpServer()).post('/payments').set('Idempotency-Key', 'same').send({});
    expect(other.headers['idempotent-replayed']).toBeUndefined();
    expect(two.get(Runs).of('payments')).toBe(1);
  });

  it("two keyPrefixes on one InMemoryStore never see each other's records", async () => {
    const cache = new InMemoryStore();
    const one = await start(adapter, {
      imports: [IdempotencyModule.forRoot({ store: cache, keyPrefix: 'a:' })],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    const two = await start(adapter, {
      imports: [IdempotencyModule.forRoot({ store: cache, keyPrefix: 'b:' })],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    await request(one.getHttpServer()).post('/payments').set('Idempotency-Key', 'shared').send({});
    const res = await request(two.getHttpServer()).post('/payments').set('Idempotency-Key', 'shared').send({});
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    expect(cache.size).toBe(2);
  });

  it('a store outage on claim fails closed with 503 and the handler does not run', async () => {
    const broken: IdempotencyStore = {
      claim: () => Promise.reject(new Error('connection refused at /var/run/store.sock')),
      commit: () => Promise.resolve(false),
      release: () => Promise.resolve(false),
      renew: () => Promise.resolve(false),
    };
    const app = await start(adapter, {
      imports: [IdempotencyModule.forRoot({ store: broken })],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    const res = await request(app.getHttpServer()).post('/payments').set('Idempotency-Key', 'o').send({});
    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.body).toEqual({ error: 'idempotency store unavailable; retry shortly' });
    expect(app.get(Runs).total()).toBe(0);
  });

  it("a failed commit still sends the handler's response", async () => {
    const inner = new InMemoryStore();
    const store: IdempotencyStore = {
      claim: (k, c) => inner.claim(k, c),
      release: (k, o) => inner.release(k, o),
      renew: (k, o, l) => inner.renew(k, o, l),
      commit: () => Promise.reject(new Error('store went away')),
    };
    const app = await start(adapter, {
      // A short lease: the commit is retried until it ends, and the app closes once the key is given up.
      imports: [IdempotencyModule.forRoot({ store: store, leaseMs: 300 })],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    const res = await request(app.getHttpServer()).post('/payments').set('Idempotency-Key', 'f').send({ a: 1 });
    expect(res.status).toBe(201);
    expect(res.body.txId).toBe('tx-1');
  });
});

@Controller()
class StreamController {
  constructor(@Inject(Runs) private readonly runs: Runs) {}

  @Post('file')
  @Idempotent()
  file() {
    this.runs.hit('file');
    return new StreamableFile(Buffer.from('file body'));
  }

  @Post('readable')
  @Idempotent()
  readable() {
    this.runs.hit('readable');
    return Readable.from(['a', 'b']);
  }
}

describe.each(ADAPTERS)('runtime streams on %s', (adapter) => {
  it('B10. a returned stream is sent, not stored, and its key is released', async () => {
    const app = await start(adapter, {
      imports: [IdempotencyModule.forRoot()],
      controllers: [StreamController],
      providers: [Runs],
    });
    const a = await request(app.getHttpServer()).post('/file').set('Idempotency-Key', 's').buffer(true);
    const b = await request(app.getHttpServer()).post('/file').set('Idempotency-Key', 's').buffer(true);
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    expect(b.headers['idempotent-replayed']).toBeUndefined();
    expect(app.get(Runs).of('file')).toBe(2);
    const c = await request(app.getHttpServer()).post('/readable').set('Idempotency-Key', 'r').buffer(true);
    const d = await request(app.getHttpServer()).post('/readable').set('Idempotency-Key', 'r').buffer(true);
    expect([c.status, d.status]).toEqual([201, 201]);
    expect(d.headers['idempotent-replayed']).toBeUndefined();
    expect(app.get(Runs).of('readable')).toBe(2);
  });
});

@Controller()
class RawResponseController {
  @Post('raw')
  @Idempotent()
  raw(@Res() res: { json(v: unknown): void }) {
    res.json({});
  }
}

@Controller()
class SseController {
  @Sse('events')
  @Idempotent()
  events() {
    return interval(1000).pipe(map((n) => ({ data: n })));
  }
}

describe('bootstrap refuses what cannot be replayed', () => {
  it('B10. @Res() without passthrough', async () => {
    await expect(
      startApp('express', { imports: [IdempotencyModule.forRoot()], controllers: [RawResponseController] }),
    ).rejects.toThrow('@Idempotent() on RawResponseController.raw(): @Res()/@Next() without { passthrough: true }');
  });

  it('B10. @Sse()', async () => {
    await expect(startApp('express', { imports: [IdempotencyModule.forRoot()], controllers: [SseController] })).rejects.toThrow(
      '@Idempotent() on SseController.events(): an @Sse() stream cannot be stored and replayed',
    );
  });

  it.each(ADAPTERS)(
    '@Idempotent() without IdempotencyModule imported names the module and where it goes (%s)',
    async (adapter) => {
      @Controller()
      class Orphan {
        @Post('x')
        @Idempotent()
        x() {
          return {};
        }
      }
      await expect(startApp(adapter, { controllers: [Orphan] })).rejects.toThrow(
        '@Idempotent() needs IdempotencyModule: add IdempotencyModule.forRoot() (or forRootAsync()) to the imports of your AppModule; it is global, so once is enough (with isGlobal: false, import it in each module whose controllers use @Idempotent())',
      );
    },
  );

  it('@IdempotencyKey() on a route without @Idempotent() is refused, naming the route', async () => {
    @Controller()
    class KeyOnly {
      @Post('charge')
      charge(@IdempotencyKey() key: string | undefined) {
        return { key };
      }
    }
    await expect(startApp('express', { imports: [IdempotencyModule.forRoot()], controllers: [KeyOnly] })).rejects.toThrow(
      '@IdempotencyKey() on KeyOnly.charge(): the key is read on @Idempotent() routes only, so here it would be undefined and nothing deduplicated: add @Idempotent() to the route, or remove @IdempotencyKey()',
    );
  });

  it('bad route options, naming the handler', async () => {
    @Controller()
    class BadTtl {
      @Post('x')
      @Idempotent({ ttlMs: -5 })
      x() {
        return {};
      }
    }
    await expect(startApp('express', { imports: [IdempotencyModule.forRoot()], controllers: [BadTtl] })).rejects.toThrow(
      '@Idempotent() on BadTtl.x(): ttlMs must be an integer from 1 to 31536000000, got -5',
    );
  });
});

describe('module options', () => {
  it.each([
    [{ ttlMs: 0 }, 'IdempotencyModule: ttlMs must be an integer from 1 to 31536000000, got 0'],
    [{ maxKeyLength: 1.5 }, 'IdempotencyModule: maxKeyLength must be an integer from 1 to 9007199254740991, got 1.5'],
    [{ maxScopeLength: -1 }, 'IdempotencyModule: maxScopeLength must be an integer from 1 to 9007199254740991, got -1'],
    [{ leaseMs: 2 }, 'IdempotencyModule: leaseMs must be an integer from 3 to 2147483647, got 2'],
    [{ missingHeader: 'ignore' }, "IdempotencyModule: missingHeader must be 'reject' or 'pass-through', got ignore"],
    [{ headerName: 'bad header' }, 'IdempotencyModule: headerName must be a valid HTTP header name'],
    [{ keyPrefix: 'a b' }, 'IdempotencyModule: keyPrefix must be a string without control characters or spaces'],
    [{ identity: 'user' }, 'IdempotencyModule: identity must be a function'],
    [{ cache: {} }, 'IdempotencyModule: cache must implement IdempotencyStore (missing claim())'],
  ])('%j is refused at startup', async (options, message) => {
    await expect(
      startApp('express', {
        imports: [IdempotencyModule.forRoot(options as IdempotencyModuleOptions)],
        controllers: [TestController],
        providers: [Runs, Gate],
      }),
    ).rejects.toThrow(message);
  });

  it('forRoot() builds nothing until the application starts', () => {
    const definition = IdempotencyModule.forRoot({ ttlMs: -1 });
    expect(definition.module).toBe(IdempotencyModule);
    expect(definition.global).toBe(true);
  });

  it('headerName is matched case-insensitively', async () => {
    const app = await start('express', {
      imports: [IdempotencyModule.forRoot({ headerName: 'X-Request-Key' })],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    await request(app.getHttpServer()).post('/payments').set('x-request-key', 'h').send({});
    const b = await request(app.getHttpServer()).post('/payments').set('X-REQUEST-KEY', 'h').send({});
    expect(b.headers['idempotent-replayed']).toBe('true');
    const missing = await request(app.getHttpServer()).post('/payments').set('Idempotency-Key', 'h').send({});
    expect(missing.body).toEqual({ error: 'x-request-key header is required' });
  });
});

describe('forRootAsync()', () => {
  const variants = {
    useFactory: IdempotencyModule.forRootAsync({
      imports: [ConfigModule],
      inject: [Config],
      useFactory: async (config: Config) => ({ ttlMs: config.ttlMs, missingHeader: 'pass-through' as const }),
    }),
    useClass: IdempotencyModule.forRootAsync({ imports: [ConfigModule], useClass: OptionsFactory }),
    useExisting: IdempotencyModule.forRootAsync({
      imports: [ConfigModule],
      useExisting: OptionsFactory,
      extraProviders: [OptionsFactory],
    }),
  };
  it.each(Object.entries(variants))('%s applies the built options', async (_, definition) => {
    const app = await start('express', { imports: [definition], controllers: [TestController], providers: [Runs, Gate] });
    const noKey = await request(app.getHttpServer()).post('/payments').send({});
    expect(noKey.status).toBe(201);
    await request(app.getHttpServer()).post('/payments').set('Idempotency-Key', 'a').send({});
    const replay = await request(app.getHttpServer()).post('/payments').set('Idempotency-Key', 'a').send({});
    expect(replay.headers['idempotent-replayed']).toBe('true');
  });

  it('refuses a definition without a factory', () => {
    expect(() => IdempotencyModule.forRootAsync({})).toThrow('needs useFactory, useClass or useExisting');
  });

  it('validates what the factory returns', async () => {
    const definition = IdempotencyModule.forRootAsync({ useFactory: () => ({ ttlMs: -1 }) });
    await expect(
      startApp('express', { imports: [definition], controllers: [TestController], providers: [Runs, Gate] }),
    ).rejects.toThrow('IdempotencyModule: ttlMs must be an integer from 1 to 31536000000, got -1');
  });
});
