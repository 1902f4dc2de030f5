import { type DynamicModule, Module } from '@nestjs/common';
import { IdempotencyModule, type IdempotencyStore, InMemoryCache } from '../lib/index.js';
import { AccountIdentityResolver } from './account-identity.resolver.js';
import { DATABASE_PATH, DatabaseService } from './database.service.js';
import { OrdersController } from './orders.controller.js';
import { PaymentsController, PROVIDER_LATENCY_MS } from './payments.controller.js';

export interface SampleOptions {
  /** SQLite file; ':memory:' keeps nothing after exit. */
  databasePath: string;
  /** Idempotency store; default a dedicated InMemoryCache. */
  cache?: IdempotencyStore;
  /** Claim lease in ms (module default 60 s). */
  leaseMs?: number;
  /** Simulated latency of the payment provider, in ms (default 0). */
  providerLatencyMs?: number;
}

@Module({})
export class AppModule {
  static register(options: SampleOptions): DynamicModule {
    return {
      module: AppModule,
      imports: [
        IdempotencyModule.forRoot({
          cache: options.cache ?? new InMemoryCache({ maxEntries: 200_000 }),
          identity: AccountIdentityResolver,
          leaseMs: options.leaseMs,
        }),
      ],
      controllers: [PaymentsController, OrdersController],
      providers: [
        { provide: DATABASE_PATH, useValue: options.databasePath },
        { provide: PROVIDER_LATENCY_MS, useValue: options.providerLatencyMs ?? 0 },
        DatabaseService,
        AccountIdentityResolver,
      ],
    };
  }
}
