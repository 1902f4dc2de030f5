import { type DynamicModule, Module } from '@nestjs/common';
import { IdempotencyModule, type IdempotencyStore, SqliteStore } from '../lib/index.js';
import { AccountIdentityResolver } from './account-identity.resolver.js';
import { DatabaseModule } from './database.module.js';
import { DatabaseService } from './database.service.js';
import { OrdersController } from './orders.controller.js';
import { PaymentsController, PROVIDER_LATENCY_MS } from './payments.controller.js';

export interface SampleOptions {
  /** SQLite file; ':memory:' keeps nothing after exit. */
  databasePath: string;
  /** Idempotency store; default a SqliteStore in the sample's own database, beside the payments. */
  cache?: IdempotencyStore;
  /** Claim lease in ms (module default 60 s). */
  leaseMs?: number;
  /** What a duplicate of a payment still running gets: 409 (default) or, with `'wait'`, the replay. */
  inFlight?: 'conflict' | 'wait';
  /** With `inFlight: 'wait'`: the longest a duplicate waits, in ms (module default 5 s). */
  waitMs?: number;
  /** Simulated latency of the payment provider, in ms (default 0). */
  providerLatencyMs?: number;
}

@Module({})
export class AppModule {
  static register(options: SampleOptions): DynamicModule {
    const database = DatabaseModule.register(options.databasePath);
    return {
      module: AppModule,
      imports: [
        database,
        // forRootAsync, because the default store needs the database connection the app opens.
        IdempotencyModule.forRootAsync({
          imports: [database],
          inject: [DatabaseService],
          useFactory: (db: DatabaseService) => ({
            store: options.cache ?? new SqliteStore({ database: db.connection }),
            identity: AccountIdentityResolver,
            leaseMs: options.leaseMs,
            inFlight: options.inFlight,
            waitMs: options.waitMs,
          }),
        }),
      ],
      controllers: [PaymentsController, OrdersController],
      providers: [{ provide: PROVIDER_LATENCY_MS, useValue: options.providerLatencyMs ?? 0 }, AccountIdentityResolver],
    };
  }
}
