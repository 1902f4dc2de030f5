import { type DynamicModule, Module, type Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { IDEMPOTENCY_MODULE_OPTIONS } from './idempotency.constants.js';
import { IdempotencyExplorer } from './idempotency.explorer.js';
import { IdempotencyExceptionFilter } from './idempotency.filter.js';
import { IdempotencyInterceptor } from './idempotency.interceptor.js';
import { IdempotencyService } from './idempotency.service.js';
import type {
  IdempotencyModuleAsyncOptions,
  IdempotencyModuleOptions,
  IdempotencyModuleRootOptions,
  IdempotencyOptionsFactory,
} from './interfaces/idempotency-module-options.interface.js';
import { resolveModuleOptions } from './utils/options.util.js';

/** The options as the user gave them; resolved (and validated) when the application starts. */
const RAW_OPTIONS = Symbol('IDEMPOTENCY_RAW_OPTIONS');

/** `registration` names the call in errors about options that belong to it rather than to the options. */
const resolvedOptions = (registration: 'forRoot()' | 'forRootAsync()'): Provider => ({
  provide: IDEMPOTENCY_MODULE_OPTIONS,
  useFactory: (raw: IdempotencyModuleOptions) => resolveModuleOptions(raw, registration),
  inject: [RAW_OPTIONS],
});

const PROVIDERS = [IdempotencyService, IdempotencyExplorer, IdempotencyInterceptor, IdempotencyExceptionFilter];
const EXPORTS = [IDEMPOTENCY_MODULE_OPTIONS, IdempotencyService, IdempotencyInterceptor, IdempotencyExceptionFilter];

/**
 * Registers idempotency for `@Idempotent()` routes. Global by default; each registration gets a
 * store of its own unless `cache` is given.
 */
@Module({})
export class IdempotencyModule {
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
      throw new Error('IdempotencyModule.forRootAsync() needs useFactory, useClass or useExisting');
    }
    const fromFactory: Provider = {
      provide: RAW_OPTIONS,
      useFactory: (f: IdempotencyOptionsFactory) => f.createIdempotencyOptions(),
      inject: [factory],
    };
    return options.useClass ? [fromFactory, { provide: options.useClass, useClass: options.useClass }] : [fromFactory];
  }
}
