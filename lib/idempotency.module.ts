import {
  type DynamicModule,
  Inject,
  Module,
  type BeforeApplicationShutdown,
  type OnApplicationShutdown,
  type OnModuleInit,
  Optional,
  type Provider,
} from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, MetadataScanner } from '@nestjs/core';
import { ResponseSealer } from './ops/encryption/response.sealer.js';
import { IdempotencyAdmin } from './ops/admin/idempotency.admin.js';
import { IdempotencyInbox } from './transports/inbox/idempotency.inbox.js';
import { InboxRunner } from './core/inbox.runner.js';
import { MessageAcknowledger } from './transports/messages/message.acknowledger.js';
import { MessageRunner } from './transports/messages/message.runner.js';
import { GraphqlRunner } from './transports/graphql/graphql.runner.js';
import { IdempotencyHealthIndicator } from './ops/health/idempotency.health-indicator.js';
import { IdempotencyObserver } from './core/events/idempotency.observer.js';
import { OutcomeReporter } from './core/events/outcome.reporter.js';
import { IDEMPOTENCY_MODULE_OPTIONS, IDEMPOTENCY_TRANSPORTS, RECORD_SEALER } from './shared/idempotency.constants.js';
import { IdempotencyExplorer } from './nest/idempotency.explorer.js';
import { IdempotencyExceptionFilter } from './nest/idempotency.filter.js';
import { IdempotencyInterceptor } from './nest/idempotency.interceptor.js';
import { CONFIG_ERRORS } from './shared/messages/config.messages.js';
import { IdempotencyService } from './core/idempotency.service.js';
import { KeyClaimer } from './core/key.claimer.js';
import { DuplicateWaiters } from './core/waiting/duplicate.waiters.js';
import { IdentityResolverLoader } from './core/identity-resolver.loader.js';
import { RecordBuilder } from './core/record.builder.js';
import { RecordCommitter } from './core/record.committer.js';
import { RequestFingerprinter } from './transports/http/request.fingerprinter.js';
import type {
  IdempotencyModuleAsyncOptions,
  IdempotencyModuleOptions,
  IdempotencyModuleRootOptions,
  IdempotencyOptionsFactory,
} from './shared/interfaces/idempotency-module-options.interface.js';
import type { ResolvedIdempotencyOptions } from './shared/interfaces/resolved-options.interface.js';
import { ReplyRecorderInstaller } from './transports/http/reply-recorder.installer.js';
import { LeaseRenewer } from './core/lease.renewer.js';
import { OpenApiExplorer } from './ops/openapi/openapi.explorer.js';
import { resolveModuleOptions } from './shared/options/module-options.resolver.js';
import { RouteOptionsRegistry } from './nest/route-options.registry.js';
import { TransactionFailures } from './core/transaction.failures.js';
import { TransactionSettler } from './core/transaction.settler.js';
import { CommitSettler } from './core/commit.settler.js';
import { TransactionRunner } from './transports/http/transaction.runner.js';
import { PhasedRunner } from './transports/http/phased.runner.js';
import { PhaseSettler } from './core/phase.settler.js';
import { HttpTransport } from './transports/http/http.transport.js';
import { transportTable } from './core/transport.table.js';
import { IdempotencyCompleter } from './core/idempotency.completer.js';
import { InMemoryStore } from './stores/memory/in-memory.store.js';

/** The options as the user gave them; resolved (and validated) when the application starts. */
const RAW_OPTIONS = Symbol('IDEMPOTENCY_RAW_OPTIONS');

/**
 * Without a `store` option each registration gets an `InMemoryStore` of its own: works on one
 * instance with no setup, and two registrations never share keys by accident.
 */
const defaultStore = () => new InMemoryStore();

/** `registration` names the call in errors about options that belong to it rather than to the options. */
const resolvedOptions = (registration: 'forRoot()' | 'forRootAsync()'): Provider => ({
  provide: IDEMPOTENCY_MODULE_OPTIONS,
  useFactory: (raw: IdempotencyModuleOptions) => resolveModuleOptions(raw, defaultStore, registration),
  inject: [RAW_OPTIONS],
});

/**
 * Documents the routes while the application is created (an async factory), not at init: most
 * applications call `SwaggerModule.createDocument()` before `listen()`.
 */
const openApiExplorer: Provider = {
  provide: OpenApiExplorer,
  useFactory: async (
    options: ResolvedIdempotencyOptions,
    discovery: DiscoveryService,
    scanner: MetadataScanner,
    routes: RouteOptionsRegistry,
  ) => {
    const explorer = new OpenApiExplorer(options, discovery, scanner, routes);
    await explorer.explore();
    return explorer;
  },
  inject: [IDEMPOTENCY_MODULE_OPTIONS, DiscoveryService, MetadataScanner, RouteOptionsRegistry],
};

/**
 * The surfaces `@Idempotent()` works on, by execution-context type: a new transport is a folder under
 * transports/ and a line here.
 */
const transports: Provider = {
  provide: IDEMPOTENCY_TRANSPORTS,
  useFactory: (http: HttpTransport, messages: MessageRunner, graphql: GraphqlRunner) => transportTable([http, messages, graphql]),
  inject: [HttpTransport, MessageRunner, GraphqlRunner],
};

const PROVIDERS = [
  ResponseSealer,
  { provide: RECORD_SEALER, useExisting: ResponseSealer },
  IdempotencyAdmin,
  IdempotencyInbox,
  IdempotencyCompleter,
  IdempotencyHealthIndicator,
  IdempotencyObserver,
  OutcomeReporter,
  DuplicateWaiters,
  KeyClaimer,
  IdempotencyService,
  RouteOptionsRegistry,
  IdentityResolverLoader,
  RequestFingerprinter,
  RecordBuilder,
  RecordCommitter,
  LeaseRenewer,
  TransactionFailures,
  TransactionSettler,
  CommitSettler,
  TransactionRunner,
  PhaseSettler,
  PhasedRunner,
  InboxRunner,
  MessageAcknowledger,
  MessageRunner,
  GraphqlRunner,
  HttpTransport,
  transports,
  IdempotencyExplorer,
  ReplyRecorderInstaller,
  openApiExplorer,
  IdempotencyInterceptor,
  IdempotencyExceptionFilter,
];
// Nest instantiates the interceptor and the filter @Idempotent() applies in each module whose
// controllers use it, so what those two inject is exported (the transports, the route options, the
// options); the rest is what applications inject.
const EXPORTS = [
  IDEMPOTENCY_MODULE_OPTIONS,
  IDEMPOTENCY_TRANSPORTS,
  RouteOptionsRegistry,
  IdempotencyAdmin,
  IdempotencyInbox,
  IdempotencyCompleter,
  IdempotencyHealthIndicator,
];

/**
 * Registers idempotency for `@Idempotent()` routes. Global by default; each registration gets a
 * store of its own unless `store` is given.
 */
@Module({})
export class IdempotencyModule implements OnModuleInit, BeforeApplicationShutdown, OnApplicationShutdown {
  /**
   * @internal Nest builds the module from `forRoot()` / `forRootAsync()`. Optional: imported without
   * them, the module provides nothing and has nothing to close.
   */
  constructor(
    @Optional() @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options?: ResolvedIdempotencyOptions,
    @Optional() private readonly leases?: LeaseRenewer,
  ) {}

  static forRoot(options: IdempotencyModuleRootOptions = {}): DynamicModule {
    const { isGlobal = true, ...moduleOptions } = options;
    return {
      module: IdempotencyModule,
      global: isGlobal,
      imports: [DiscoveryModule],
      providers: [{ provide: RAW_OPTIONS, useValue: moduleOptions }, resolvedOptions('forRoot()'), ...PROVIDERS],
      exports: EXPORTS,
    };
  }

  static forRootAsync(options: IdempotencyModuleAsyncOptions): DynamicModule {
    return {
      module: IdempotencyModule,
      global: options.isGlobal ?? true,
      imports: [DiscoveryModule, ...(options.imports ?? [])],
      providers: [
        ...this.asyncOptionsProviders(options),
        resolvedOptions('forRootAsync()'),
        ...(options.extraProviders ?? []),
        ...PROVIDERS,
      ],
      exports: EXPORTS,
    };
  }

  private static asyncOptionsProviders(options: IdempotencyModuleAsyncOptions): Provider[] {
    if (options.useFactory) {
      return [{ provide: RAW_OPTIONS, useFactory: options.useFactory, inject: options.inject ?? [] }];
    }
    const factory = options.useClass ?? options.useExisting;
    if (!factory) {
      throw new Error(CONFIG_ERRORS.asyncNeedsFactory);
    }
    const fromFactory: Provider = {
      provide: RAW_OPTIONS,
      useFactory: (f: IdempotencyOptionsFactory) => f.createIdempotencyOptions(),
      inject: [factory],
    };
    return options.useClass ? [fromFactory, { provide: options.useClass, useClass: options.useClass }] : [fromFactory];
  }

  /**
   * Lets the store connect (and create its schema) before the first request; a failure fails the
   * start. It is told the largest response it must hold, so a store with a bound below it refuses now.
   */
  async onModuleInit(): Promise<void> {
    await this.options?.store.open?.({ maxResponseBytes: this.options.maxResponseBytes });
  }

  /**
   * On a graceful shutdown (after every module's `onModuleDestroy`, before the HTTP server closes and
   * before any `onApplicationShutdown`, where applications close their database pools): new requests
   * with a key get 503 and Retry-After (their client retries on another pod), and the shutdown waits
   * until every handler still running has committed or released its key, renewing the leases
   * meanwhile. Then the store closes (a Redis client it created; a client the application passed in
   * stays open). Closed earlier, a handler finishing during a rolling deploy lost its key to a retry
   * on another pod, or could not commit.
   */
  async beforeApplicationShutdown(): Promise<void> {
    await this.leases?.drain();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.options?.store.close?.();
  }
}
