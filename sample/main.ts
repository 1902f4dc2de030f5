import 'reflect-metadata';
import { type INestApplication, Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { type IdempotencyStore, InMemoryStore, MySqlStore, PostgresStore, RedisStore } from '../lib/index.js';
import { AppModule } from './app.module.js';

function numberFromEnv(name: string): number | undefined {
  const value = process.env[name];
  return value === undefined || value === '' ? undefined : Number(value);
}

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required here (STORE=${process.env.STORE ?? ''}, SAMPLE=${process.env.SAMPLE ?? ''})`);
  return value;
}

/** STORE picks the idempotency store; undefined means the default, SQLite in the sample's database. */
function storeFromEnv(): IdempotencyStore | undefined {
  switch (process.env.STORE || 'sqlite') {
    case 'sqlite':
      return undefined;
    case 'memory':
      return new InMemoryStore({ maxEntries: 200_000 });
    case 'redis':
      return new RedisStore({ url: required('REDIS_URL') });
    case 'postgres':
      return new PostgresStore({ connectionString: required('DATABASE_URL') });
    case 'mysql':
      return new MySqlStore({ uri: required('DATABASE_URL') });
    default:
      throw new Error(`STORE must be sqlite, memory, redis, postgres or mysql, got ${process.env.STORE}`);
  }
}

/** SAMPLE=ledger: charges in PostgreSQL or MySQL (DATABASE_URL), exactly-once with the idempotency record. */
async function ledgerFromEnv() {
  const store = process.env.STORE || 'postgres';
  if (store !== 'postgres' && store !== 'mysql' && store !== 'redis') {
    throw new Error(`SAMPLE=ledger needs STORE=postgres, mysql or redis, got ${store}`);
  }
  // Loaded only here: the payments sample runs without TypeORM and nestjs-cls.
  const { LedgerModule } = await import('./ledger/ledger.module.js');
  return LedgerModule.register({
    databaseUrl: required('DATABASE_URL'),
    store,
    redisUrl: process.env.REDIS_URL || undefined,
    leaseMs: numberFromEnv('IDEMPOTENCY_LEASE_MS'),
    transactionTimeoutMs: numberFromEnv('TRANSACTION_TIMEOUT_MS'),
    latencyMs: numberFromEnv('PAYMENT_PROVIDER_LATENCY_MS') ?? 0,
    rabbitmqUrl: process.env.RABBITMQ_URL || undefined,
    fault: process.env.FAULT || undefined,
    providerUrl: process.env.PAYMENT_PROVIDER_URL || undefined,
    completerIntervalMs: numberFromEnv('COMPLETER_INTERVAL_MS'),
    completerIdleMs: numberFromEnv('COMPLETER_IDLE_MS'),
  });
}

/**
 * SAMPLE=ledger with RABBITMQ_URL: the same app consumes charge.requested events, with manual acks
 * that the module sends once each charge is committed. Loaded only here: the HTTP samples run
 * without @nestjs/microservices.
 */
async function consumeChargeRequests(app: INestApplication, url: string): Promise<void> {
  const { Transport } = await import('@nestjs/microservices');
  const { CHARGE_REQUESTS_QUEUE } = await import('./ledger/charge-requests.consumer.js');
  app.connectMicroservice({ transport: Transport.RMQ, options: { urls: [url], queue: CHARGE_REQUESTS_QUEUE, noAck: false } });
  // Messages already queued arrive as soon as the consumer starts: the modules' init hooks (the CLS
  // plugins', the store's open()) must have run by then, and startAllMicroservices() does not run them.
  await app.init();
  await app.startAllMicroservices();
}

/**
 * The OpenAPI document at /api/docs-json (Swagger UI at /api/docs on Express), when @nestjs/swagger
 * is installed: the module has documented every @Idempotent() route in it by now.
 */
async function serveOpenApi(app: INestApplication): Promise<void> {
  const swagger = await import('@nestjs/swagger').catch(() => undefined);
  if (!swagger) return;
  const document = swagger.SwaggerModule.createDocument(app, new swagger.DocumentBuilder().setTitle('Payments sample').build());
  // Swagger UI on Fastify needs @fastify/static; the JSON document does not.
  const ui = process.env.ADAPTER !== 'fastify';
  swagger.SwaggerModule.setup('api/docs', app, document, { ui, raw: ['json'], jsonDocumentUrl: 'api/docs-json' });
}

/**
 * The sample payments API. Environment: PORT (3000), HOST (127.0.0.1), ADAPTER ('express' or 'fastify'),
 * DATABASE (SQLite file, default 'payments.db'), STORE ('sqlite' (default: records beside the payments),
 * 'memory', 'redis' with REDIS_URL, 'postgres' with DATABASE_URL), IDEMPOTENCY_LEASE_MS,
 * IDEMPOTENCY_IN_FLIGHT=wait (a duplicate waits for the first instead of a 409; IDEMPOTENCY_WAIT_MS how long), PAYMENT_PROVIDER_LATENCY_MS (simulated provider call), FORCE_CLOSE_CONNECTIONS=1 (Nest's
 * forceCloseConnections). Shutdown hooks are on: SIGTERM lets running handlers finish and commit.
 *
 * SAMPLE=ledger starts the second sample instead (sample/ledger/): charges in PostgreSQL at
 * DATABASE_URL through TypeORM, exactly-once with STORE=postgres (default), or the cache-style
 * contrast with STORE=redis (REDIS_URL); TRANSACTION_TIMEOUT_MS; PAYMENT_PROVIDER_LATENCY_MS is a
 * pause after the charge is written, inside its transaction; FAULT=after-commit kills the process
 * between COMMIT and the response (for a consumed message: before its ack), FAULT=after:ride_created,
 * before-record:charge_created or after:charge_created at that point of a ride's phases;
 * PAYMENT_PROVIDER_URL is the rides route's payment provider (default: a stand-in); COMPLETER_INTERVAL_MS
 * (and COMPLETER_IDLE_MS) run the completer for rides nobody came back for. RABBITMQ_URL: the ledger
 * also consumes charge.requested events from the queue ledger.charge-requests (README, "Message handlers").
 */
async function bootstrap(): Promise<void> {
  const module =
    process.env.SAMPLE === 'ledger'
      ? await ledgerFromEnv()
      : AppModule.register({
          databasePath: process.env.DATABASE || 'payments.db',
          cache: storeFromEnv(),
          leaseMs: numberFromEnv('IDEMPOTENCY_LEASE_MS'),
          inFlight: process.env.IDEMPOTENCY_IN_FLIGHT === 'wait' ? 'wait' : undefined,
          waitMs: numberFromEnv('IDEMPOTENCY_WAIT_MS'),
          providerLatencyMs: numberFromEnv('PAYMENT_PROVIDER_LATENCY_MS'),
        });
  // FORCE_CLOSE_CONNECTIONS=1: on shutdown, open connections are ended at once instead of drained.
  const appOptions = { forceCloseConnections: process.env.FORCE_CLOSE_CONNECTIONS === '1' };
  const app =
    process.env.ADAPTER === 'fastify'
      ? await NestFactory.create(module, new FastifyAdapter(), appOptions)
      : await NestFactory.create(module, appOptions);
  app.setGlobalPrefix('api');
  app.enableShutdownHooks();
  if (process.env.SAMPLE === 'ledger' && process.env.RABBITMQ_URL) await consumeChargeRequests(app, process.env.RABBITMQ_URL);
  await serveOpenApi(app);
  const port = Number(process.env.PORT ?? 3000);
  const host = process.env.HOST ?? '127.0.0.1';
  await app.listen(port, host);
  // PORT=0 lets the system pick a free port: the line below says which one.
  const address = (app.getHttpServer() as { address(): { port: number } | string | null }).address();
  const listening = typeof address === 'object' && address ? address.port : port;
  const [sample, store] = process.env.SAMPLE === 'ledger' ? ['ledger', 'postgres'] : ['payments', 'sqlite'];
  Logger.log(`${sample} API on http://${host}:${listening}/api, idempotency store: ${process.env.STORE || store}`, 'Sample');
}

void bootstrap();
