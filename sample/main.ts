import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { type IdempotencyStore, InMemoryCache, PostgresStore, RedisCache, RedisCacheOptions } from '../lib/index.js';
import { AppModule } from './app.module.js';

function numberFromEnv(name: string): number | undefined {
  const value = process.env[name];
  return value === undefined || value === '' ? undefined : Number(value);
}

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`STORE=${process.env.STORE} needs ${name}`);
  return value;
}

/** STORE picks the idempotency store; undefined means the default, SQLite in the sample's database. */
function storeFromEnv(): IdempotencyStore | undefined {
  switch (process.env.STORE || 'sqlite') {
    case 'sqlite':
      return undefined;
    case 'memory':
      return new InMemoryCache({ maxEntries: 200_000 });
    case 'redis':
      return new RedisCache(RedisCacheOptions.create().withUrl(required('REDIS_URL')));
    case 'postgres':
      return new PostgresStore({ connectionString: required('DATABASE_URL') });
    default:
      throw new Error(`STORE must be sqlite, memory, redis or postgres, got ${process.env.STORE}`);
  }
}

/**
 * The sample payments API. Environment: PORT (3000), HOST (127.0.0.1), ADAPTER ('express' or 'fastify'),
 * DATABASE (SQLite file, default 'payments.db'), STORE ('sqlite' (default: records beside the payments),
 * 'memory', 'redis' with REDIS_URL, 'postgres' with DATABASE_URL), IDEMPOTENCY_LEASE_MS,
 * PAYMENT_PROVIDER_LATENCY_MS (simulated provider call).
 */
async function bootstrap(): Promise<void> {
  const module = AppModule.register({
    databasePath: process.env.DATABASE || 'payments.db',
    cache: storeFromEnv(),
    leaseMs: numberFromEnv('IDEMPOTENCY_LEASE_MS'),
    providerLatencyMs: numberFromEnv('PAYMENT_PROVIDER_LATENCY_MS'),
  });
  const app =
    process.env.ADAPTER === 'fastify' ? await NestFactory.create(module, new FastifyAdapter()) : await NestFactory.create(module);
  app.setGlobalPrefix('api');
  app.enableShutdownHooks();
  const port = Number(process.env.PORT ?? 3000);
  const host = process.env.HOST ?? '127.0.0.1';
  await app.listen(port, host);
  Logger.log(`payments API on http://${host}:${port}/api, idempotency store: ${process.env.STORE || 'sqlite'}`, 'Sample');
}

void bootstrap();
