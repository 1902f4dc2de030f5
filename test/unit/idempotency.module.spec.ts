import { describe, expect, it } from '@jest/globals';
import { Controller, Inject, Injectable, Module, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import {
  IdempotencyAdmin,
  IdempotencyCompleter,
  IdempotencyHealthIndicator,
  IdempotencyInbox,
  IdempotencyKey,
  IdempotencyModule,
  Idempotent,
  InMemoryStore,
} from '../../lib/index.js';
import { IdempotencyExceptionFilter } from '../../lib/nest/idempotency.filter.js';
import { IdempotencyInterceptor } from '../../lib/nest/idempotency.interceptor.js';
import { IDEMPOTENCY_MODULE_OPTIONS, IDEMPOTENT_ROUTE_METADATA } from '../../lib/shared/idempotency.constants.js';
import { rememberKey } from '../../lib/transports/http/request-key.store.js';
import type { ResolvedIdempotencyOptions } from '../../lib/shared/interfaces/resolved-options.interface.js';
import { IdempotencyService } from '../../lib/core/idempotency.service.js';
import { httpContext } from '../support/contexts.js';
import { Config, ConfigModule, OptionsFactory } from '../support/fixtures.js';
import { createProtocol } from '../support/protocol.js';

async function optionsOf(module: ReturnType<typeof IdempotencyModule.forRoot>, ...imports: unknown[]) {
  const app = await Test.createTestingModule({ imports: [module, ...(imports as never[])] }).compile();
  const options = app.get<ResolvedIdempotencyOptions>(IDEMPOTENCY_MODULE_OPTIONS);
  expect(app.get(IdempotencyService).options).toBe(options);
  expect(app.get(IdempotencyInterceptor)).toBeInstanceOf(IdempotencyInterceptor);
  expect(app.get(IdempotencyExceptionFilter)).toBeInstanceOf(IdempotencyExceptionFilter);
  await app.close();
  return options;
}

describe('IdempotencyModule', () => {
  it('forRoot() is global by default and resolves its options when the app starts', async () => {
    const dynamic = IdempotencyModule.forRoot({ ttlMs: 10, isGlobal: undefined });
    expect(dynamic.global).toBe(true);
    expect(IdempotencyModule.forRoot().global).toBe(true);
    expect(IdempotencyModule.forRoot({ isGlobal: false }).global).toBe(false);
    const options = await optionsOf(dynamic);
    expect(options.ttlMs).toBe(10);
    expect(options.store).toBeInstanceOf(InMemoryStore);
    expect(await optionsOf(IdempotencyModule.forRoot())).toMatchObject({ ttlMs: 86_400_000, keyPrefix: 'idem:' });
  });

  it('forRoot() hands the options on without isGlobal, and uses the given cache', async () => {
    const cache = new InMemoryStore();
    const dynamic = IdempotencyModule.forRoot({ store: cache, ttlMs: 7, isGlobal: false });
    const given = (dynamic.providers as { useValue?: unknown }[]).filter((p) => 'useValue' in p).map((p) => p.useValue);
    expect(given).toEqual([{ store: cache, ttlMs: 7 }]);
    expect((await optionsOf(dynamic)).store).toBe(cache);
  });

  it('refuses bad options at startup with the option named', async () => {
    await expect(Test.createTestingModule({ imports: [IdempotencyModule.forRoot({ ttlMs: -5 })] }).compile()).rejects.toThrow(
      'IdempotencyModule: ttlMs must be an integer from 1 to 31536000000, got -5',
    );
  });

  it('names the registration call when an option belongs to it', async () => {
    await expect(
      Test.createTestingModule({ imports: [IdempotencyModule.forRoot({ imports: [] } as never)] }).compile(),
    ).rejects.toThrow('IdempotencyModule: imports is an option of forRootAsync(), not of forRoot()');
    const factory = IdempotencyModule.forRootAsync({ useFactory: () => ({ isGlobal: true }) as never });
    await expect(Test.createTestingModule({ imports: [factory] }).compile()).rejects.toThrow(
      'IdempotencyModule: isGlobal is an option of forRootAsync() itself; the options its factory returns cannot change how the module is registered',
    );
  });

  it('forRootAsync({ useFactory, inject, imports }) builds options from injected providers', async () => {
    const dynamic = IdempotencyModule.forRootAsync({
      imports: [ConfigModule],
      inject: [Config],
      useFactory: async (config: Config) => ({ ttlMs: config.ttlMs }),
    });
    expect(dynamic.global).toBe(true);
    expect((await optionsOf(dynamic)).ttlMs).toBe(1234);
    expect(IdempotencyModule.forRootAsync({ useFactory: () => ({}), isGlobal: false }).global).toBe(false);
    expect((await optionsOf(IdempotencyModule.forRootAsync({ useFactory: () => ({ leaseMs: 30 }) }))).leaseMs).toBe(30);
  });

  it("forRootAsync() with @nestjs/config's ConfigService: an environment variable is a string, and the error says so", async () => {
    const { ConfigModule: NestConfigModule, ConfigService } = await import('@nestjs/config');
    const env = { IDEMPOTENCY_TTL_MS: '3600000' };
    const withFactory = (useFactory: (config: InstanceType<typeof ConfigService>) => object) =>
      IdempotencyModule.forRootAsync({
        imports: [NestConfigModule.forRoot({ ignoreEnvFile: true, load: [() => env] })],
        inject: [ConfigService],
        useFactory,
      });
    await expect(
      Test.createTestingModule({
        imports: [withFactory((config) => ({ ttlMs: config.get<number>('IDEMPOTENCY_TTL_MS') }))],
      }).compile(),
    ).rejects.toThrow("IdempotencyModule: ttlMs must be an integer from 1 to 31536000000, got the string '3600000'");
    // The configuration guide's recipe converts, and starts.
    expect(
      (await optionsOf(withFactory((config) => ({ ttlMs: Number(config.get('IDEMPOTENCY_TTL_MS', 86_400_000)) })))).ttlMs,
    ).toBe(3_600_000);
  });

  it('forRootAsync({ useFactory, extraProviders }) resolves what no module exports', async () => {
    const dynamic = IdempotencyModule.forRootAsync({
      extraProviders: [Config],
      inject: [Config],
      useFactory: (config: Config) => ({ ttlMs: config.ttlMs + 1 }),
    });
    expect((await optionsOf(dynamic)).ttlMs).toBe(1235);
  });

  it('forRootAsync({ useClass }) instantiates the factory itself', async () => {
    expect(
      (await optionsOf(IdempotencyModule.forRootAsync({ imports: [ConfigModule], useClass: OptionsFactory }))).keyPrefix,
    ).toBe('factory:');
  });

  it('forRootAsync({ useExisting }) uses a factory some module exports', async () => {
    @Module({ imports: [ConfigModule], providers: [OptionsFactory], exports: [OptionsFactory] })
    class FactoryModule {}
    const dynamic = IdempotencyModule.forRootAsync({ imports: [FactoryModule], useExisting: OptionsFactory });
    expect(dynamic.providers).not.toContainEqual({ provide: OptionsFactory, useClass: OptionsFactory });
    expect((await optionsOf(dynamic)).keyPrefix).toBe('factory:');
  });

  it('forRootAsync() without a way to build options is a clear error', () => {
    expect(() => IdempotencyModule.forRootAsync({})).toThrow(
      'IdempotencyModule.forRootAsync() needs useFactory, useClass or useExisting',
    );
  });

  it('exports to every module what applications inject, and what @Idempotent() needs there; the internals stay inside', async () => {
    @Injectable()
    class Consumer {
      constructor(
        @Inject(IdempotencyAdmin) readonly admin: IdempotencyAdmin,
        @Inject(IdempotencyInbox) readonly inbox: IdempotencyInbox,
        @Inject(IdempotencyCompleter) readonly completer: IdempotencyCompleter,
        @Inject(IdempotencyHealthIndicator) readonly health: IdempotencyHealthIndicator,
      ) {}
    }
    let runs = 0;
    @Controller('feature')
    class FeatureController {
      @Post()
      @Idempotent()
      create() {
        return { run: ++runs };
      }
    }
    @Module({ providers: [Consumer], controllers: [FeatureController] })
    class Feature {}
    @Injectable()
    class Internal {
      constructor(@Inject(IdempotencyService) readonly service: IdempotencyService) {}
    }
    @Module({ providers: [Internal] })
    class Reaching {}
    for (const idempotency of [IdempotencyModule.forRoot(), IdempotencyModule.forRootAsync({ useFactory: () => ({}) })]) {
      const app = (await Test.createTestingModule({ imports: [idempotency, Feature] }).compile()).createNestApplication();
      await app.init();
      const consumer = app.get(Consumer);
      expect(consumer.admin).toBeInstanceOf(IdempotencyAdmin);
      expect(consumer.inbox).toBeInstanceOf(IdempotencyInbox);
      expect(consumer.completer).toBeInstanceOf(IdempotencyCompleter);
      expect(consumer.health).toBeInstanceOf(IdempotencyHealthIndicator);
      // The interceptor and the filter @Idempotent() applies are built in Feature, from what the module exports.
      const first = await request(app.getHttpServer()).post('/feature').set('Idempotency-Key', `k-${runs}`);
      const retry = await request(app.getHttpServer())
        .post('/feature')
        .set('Idempotency-Key', `k-${runs - 1}`);
      expect([first.status, retry.status, retry.body]).toEqual([201, 201, first.body]);
      await app.close();
      await expect(Test.createTestingModule({ imports: [idempotency, Reaching] }).compile()).rejects.toThrow(
        /can't resolve dependencies of the Internal/,
      );
    }
  });

  it('closes the store on shutdown, if it can be closed', async () => {
    const { store, options } = createProtocol();
    await new IdempotencyModule(options).onApplicationShutdown();
    expect(store.closed).toBe(1);
    const bare = { claim: store.claim, commit: store.commit, release: store.release, renew: store.renew };
    await expect(new IdempotencyModule({ ...options, store: bare }).onApplicationShutdown()).resolves.toBeUndefined();
    await expect(new IdempotencyModule().onApplicationShutdown()).resolves.toBeUndefined();
  });

  it('waits for the running handlers (the lease renewer drains) before the application shuts down', async () => {
    const { options, leases } = createProtocol();
    let drained = 0;
    const watched = Object.assign(leases, { drain: async () => void drained++ });
    await new IdempotencyModule(options, watched).beforeApplicationShutdown();
    expect(drained).toBe(1);
    await expect(new IdempotencyModule(options).beforeApplicationShutdown()).resolves.toBeUndefined();
  });

  it('opens the store when the module initialises, if it can be opened', async () => {
    const { store, options } = createProtocol();
    let opened = 0;
    const openable = Object.assign(store, { open: async () => void opened++ });
    await new IdempotencyModule({ ...options, store: openable }).onModuleInit();
    expect(opened).toBe(1);
    const bare = { claim: store.claim, commit: store.commit, release: store.release, renew: store.renew };
    await expect(new IdempotencyModule({ ...options, store: bare }).onModuleInit()).resolves.toBeUndefined();
    await expect(new IdempotencyModule().onModuleInit()).resolves.toBeUndefined();
  });

  it('every registration without a cache gets a store of its own', async () => {
    const a = await optionsOf(IdempotencyModule.forRoot());
    const b = await optionsOf(IdempotencyModule.forRoot());
    expect(a.store).not.toBe(b.store);
  });
});

describe('decorators', () => {
  @Controller()
  class Payments {
    @Post('a')
    @Idempotent({ ttlMs: 5 })
    a(@IdempotencyKey() _key: string) {
      return 1;
    }

    @Post('b')
    @Idempotent()
    b() {
      return 2;
    }
  }

  it('@Idempotent() stores its options (or none) and applies the interceptor and the filter', () => {
    expect(Reflect.getMetadata(IDEMPOTENT_ROUTE_METADATA, Payments.prototype.a)).toEqual({ ttlMs: 5 });
    expect(Reflect.getMetadata(IDEMPOTENT_ROUTE_METADATA, Payments.prototype.b)).toEqual({});
    expect(Reflect.getMetadata('__interceptors__', Payments.prototype.b)).toEqual([IdempotencyInterceptor]);
    expect(Reflect.getMetadata('__exceptionFilters__', Payments.prototype.b)).toEqual([IdempotencyExceptionFilter]);
  });

  it('@IdempotencyKey() reads the key the interceptor left on the request', () => {
    const args = Reflect.getMetadata('__routeArguments__', Payments, 'a') as Record<
      string,
      { factory: (data: unknown, context: unknown) => unknown }
    >;
    const [param] = Object.values(args);
    const request = {};
    const context = httpContext({ request });
    expect(param.factory(undefined, context)).toBeUndefined();
    rememberKey(request, 'key-1');
    expect(param.factory(undefined, context)).toBe('key-1');
    expect(param.factory(undefined, httpContext({ request: {} }))).toBeUndefined();
  });
});
