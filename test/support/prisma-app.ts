import 'reflect-metadata';
import { ClsPluginTransactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterPrisma } from '@nestjs-cls/transactional-adapter-prisma';
import { BadRequestException, Body, Controller, Global, Inject, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { PrismaPg } from '@prisma/adapter-pg';
import { ClsModule } from 'nestjs-cls';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import {
  clsTransactions,
  Idempotent,
  IdempotencyKey,
  IdempotencyModule,
  type IdempotencyModuleOptions,
  PostgresStore,
} from '../../lib/index.js';

// docs/guides/exactly-once.md's Prisma line in an app of its own: @nestjs-cls/transactional is CommonJS and
// requires Nest, which jest's ESM mode cannot do on Node 20, so test/postgres/prisma.postgres.spec.ts
// runs this compiled file as a process. DATABASE_URL: the database; PRISMA_CLIENT: the folder of a
// client generated for the Payment model; ADAPTER: express or fastify.

/** The part of the generated client (and of its transaction client) this app uses. */
interface PaymentsClient {
  payment: { create(args: { data: { key: string; amount: number } }): Promise<{ id: number }> };
  $queryRawUnsafe(text: string, ...values: unknown[]): Promise<unknown>;
  $transaction(fn: (tx: PaymentsClient) => Promise<unknown>, options?: unknown): Promise<unknown>;
}

type PrismaHost = TransactionHost<TransactionalAdapterPrisma<PaymentsClient>>;

const PRISMA = Symbol('PrismaClient');
const url = process.env.DATABASE_URL!;

@Controller('payments')
class PaymentsController {
  constructor(@Inject(TransactionHost) private readonly txHost: PrismaHost) {}

  // The payment is written through the transaction the module opened; a decline is thrown after it.
  @Post()
  @Idempotent({ transactional: true })
  async create(@Body() body: { amount: number; decline?: boolean }, @IdempotencyKey() key: string): Promise<unknown> {
    const payment = await this.txHost.tx.payment.create({ data: { key, amount: body.amount } });
    if (body.decline) throw new BadRequestException('card declined by the bank');
    return { id: payment.id, amount: body.amount };
  }
}

@Global()
@Module({
  providers: [
    {
      provide: PRISMA,
      useFactory: () => {
        const { PrismaClient } = createRequire(import.meta.url)(join(process.env.PRISMA_CLIENT!)) as {
          PrismaClient: new (options: { adapter: PrismaPg }) => PaymentsClient;
        };
        return new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) });
      },
    },
  ],
  exports: [PRISMA],
})
class PrismaModule {}

@Module({
  imports: [
    PrismaModule,
    ClsModule.forRoot({
      global: true,
      middleware: { mount: true },
      plugins: [
        new ClsPluginTransactional({
          imports: [PrismaModule],
          adapter: new TransactionalAdapterPrisma<PaymentsClient>({ prismaInjectionToken: PRISMA }),
        }),
      ],
    }),
    IdempotencyModule.forRootAsync({
      inject: [TransactionHost],
      useFactory: (txHost: PrismaHost): IdempotencyModuleOptions => ({
        store: new PostgresStore({ connectionString: url, sweepIntervalMs: 0 }),
        transactions: clsTransactions(txHost, (tx, text, values) => tx.$queryRawUnsafe(text, ...values)),
      }),
    }),
  ],
  controllers: [PaymentsController],
})
class PrismaAppModule {}

const app =
  process.env.ADAPTER === 'fastify'
    ? await NestFactory.create(PrismaAppModule, new FastifyAdapter(), { logger: ['error'] })
    : await NestFactory.create(PrismaAppModule, { logger: ['error'] });
app.enableShutdownHooks();
await app.listen(0, '127.0.0.1');
console.log(`listening on ${await app.getUrl()}`);
