import { ClsPluginTransactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { type DynamicModule, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ClsModule } from 'nestjs-cls';
import { DataSource } from 'typeorm';
import {
  clsTransactions,
  IdempotencyModule,
  type IdempotencyModuleOptions,
  type IdempotencyStore,
  type IdempotencyTransactions,
  MySqlStore,
  PostgresStore,
  RedisStore,
} from '../../lib/index.js';
import { AccountIdentityResolver } from '../account-identity.resolver.js';
import { CachedChargesController } from './cached-charges.controller.js';
import { ChargeRequestsConsumer } from './charge-requests.consumer.js';
import { Charge } from './charge.entity.js';
import { ChargesController } from './charges.controller.js';
import { ChargesService } from './charges.service.js';
import { Faults } from './faults.js';
import { LEDGER_OPTIONS, type LedgerOptions } from './ledger.options.js';
import { PaymentProvider } from './payment.provider.js';
import { Ride } from './ride.entity.js';
import { RidesController } from './rides.controller.js';
import { RidesService } from './rides.service.js';

/** The port, with the crash a test asks for between COMMIT and the response. */
function crashingAfterCommit(transactions: IdempotencyTransactions, faults: Faults): IdempotencyTransactions {
  return {
    run: async (work) => {
      const result = await transactions.run(work);
      faults.afterCommit();
      return result;
    },
  };
}

/** The idempotency store of `options.store`. */
function storeOf(options: LedgerOptions): IdempotencyStore {
  switch (options.store) {
    case 'postgres':
      return new PostgresStore({ connectionString: options.databaseUrl });
    case 'mysql':
      return new MySqlStore({ uri: options.databaseUrl });
    case 'redis':
      return new RedisStore({ url: options.redisUrl ?? 'redis://127.0.0.1:6379' });
  }
}

/**
 * The second sample: charges in PostgreSQL (or MySQL) through TypeORM and `@nestjs-cls/transactional`,
 * made exactly-once by `@Idempotent({ transactional: true })` on PostgresStore (or MySqlStore), and rides booked in atomic
 * phases (`@Idempotent({ atomicPhases: true })`) around a payment provider. With `store: 'redis'` it
 * runs the same route on RedisStore instead, as the cache-style contrast.
 */
@Module({})
export class LedgerModule {
  static register(options: LedgerOptions): DynamicModule {
    const transactional = options.store !== 'redis';
    const mysql = options.store === 'mysql';
    const rides = mysql ? [] : [RidesController];
    return {
      module: LedgerModule,
      imports: [
        TypeOrmModule.forRoot({
          type: mysql ? 'mysql' : 'postgres',
          url: options.databaseUrl,
          entities: mysql ? [Charge] : [Charge, Ride],
          synchronize: true,
        }),
        ClsModule.forRoot({
          global: true,
          middleware: { mount: true },
          plugins: [new ClsPluginTransactional({ adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: DataSource }) })],
        }),
        IdempotencyModule.forRootAsync({
          inject: [TransactionHost, Faults],
          extraProviders: [Faults, { provide: LEDGER_OPTIONS, useValue: options }],
          useFactory: (txHost: TransactionHost<TransactionalAdapterTypeOrm>, faults: Faults): IdempotencyModuleOptions => ({
            store: storeOf(options),
            transactions: crashingAfterCommit(clsTransactions(txHost), faults),
            identity: AccountIdentityResolver,
            leaseMs: options.leaseMs,
            transactionTimeoutMs: options.transactionTimeoutMs,
            ...(options.completerIntervalMs !== undefined && {
              completer: { intervalMs: options.completerIntervalMs, idleMs: options.completerIdleMs },
            }),
          }),
        }),
      ],
      controllers: transactional
        ? [ChargesController, ...rides, ...(options.rabbitmqUrl ? [ChargeRequestsConsumer] : [])]
        : [CachedChargesController],
      providers: [
        { provide: LEDGER_OPTIONS, useValue: options },
        ChargesService,
        ...(mysql ? [] : [RidesService]),
        PaymentProvider,
        Faults,
        AccountIdentityResolver,
      ],
    };
  }
}
