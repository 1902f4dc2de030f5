import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { RedisCache, RedisCacheOptions } from '../lib/index.js';
import { AppModule } from './app.module.js';

function numberFromEnv(name: string): number | undefined {
  const value = process.env[name];
  return value === undefined || value === '' ? undefined : Number(value);
}

/**
 * The sample payments API. Environment: PORT (3000), HOST (127.0.0.1), ADAPTER ('express' or 'fastify'),
 * DATABASE (SQLite file, default ':memory:'), REDIS_URL (use RedisCache instead of the in-memory store),
 * IDEMPOTENCY_LEASE_MS, PAYMENT_PROVIDER_LATENCY_MS (simulated provider call).
 */
async function bootstrap(): Promise<void> {
  const redisUrl = process.env.REDIS_URL;
  const module = AppModule.register({
    databasePath: process.env.DATABASE ?? ':memory:',
    cache: redisUrl ? new RedisCache(RedisCacheOptions.create().withUrl(redisUrl)) : undefined,
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
  Logger.log(`payments API on http://${host}:${port}/api, idempotency store: ${redisUrl ? 'Redis' : 'in-memory'}`, 'Sample');
}

void bootstrap();
