import 'reflect-metadata';
import { afterEach } from '@jest/globals';
import type { INestApplication, ModuleMetadata } from '@nestjs/common';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { createServer, type RequestListener, type Server } from 'node:http';

export type AdapterName = 'express' | 'fastify';

/** Every e2e suite runs over both adapters (TEST_ADAPTERS=express narrows it, for mutation runs). */
export const ADAPTERS: AdapterName[] = (process.env.TEST_ADAPTERS?.split(',') as AdapterName[] | undefined) ?? [
  'express',
  'fastify',
];

export interface StartOptions {
  /** Node's header size limit for the server (Node's default, 16 KiB, answers 431 itself above it). */
  maxHeaderSize?: number;
  /** Runs before `init()`; awaited (a Fastify plugin registered with `await app.register()` is loaded then). */
  configure?: (app: INestApplication) => unknown;
  /** Nest's `rawBody` application option: the body's bytes kept as `req.rawBody`. */
  rawBody?: boolean;
  /** Options of the Fastify instance (its router's, say); ignored on Express. */
  fastify?: Record<string, unknown>;
}

/** Builds and initialises a real Nest application on the given adapter. */
export async function startApp(
  adapter: AdapterName,
  metadata: ModuleMetadata,
  options: StartOptions = {},
): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule(metadata).compile();
  const { maxHeaderSize, rawBody } = options;
  const app =
    adapter === 'express'
      ? moduleRef.createNestApplication({ logger: false, rawBody })
      : moduleRef.createNestApplication<NestFastifyApplication>(
          new FastifyAdapter({
            ...options.fastify,
            ...(maxHeaderSize && { serverFactory: (handler: RequestListener) => createServer({ maxHeaderSize }, handler) }),
          }),
          { logger: false, rawBody },
        );
  await options.configure?.(app);
  await app.init();
  if (adapter === 'fastify') await (app as NestFastifyApplication).getHttpAdapter().getInstance().ready();
  if (adapter === 'express' && maxHeaderSize) {
    (app.getHttpServer() as Server & { maxHeaderSize?: number }).maxHeaderSize = maxHeaderSize;
  }
  // Listening now, once: supertest then sends every request to this port over kept-alive sockets,
  // where a server that is not listening is started and closed again by supertest for each request.
  await listen(app);
  return app;
}

/** Listens on a free loopback port and returns the base URL. */
export async function listen(app: INestApplication): Promise<string> {
  const server = app.getHttpServer() as Server;
  if (!server.listening) await app.listen(0, '127.0.0.1');
  // Node's 5 s (Express's server) against fetch's 4 s: on a starved machine both timers are overdue at
  // once, the server may close a socket the client has just reused, and the request fails with
  // ECONNRESET (a CI run with other jobs on the cores). Fastify's own default is 72 s.
  server.keepAliveTimeout = 72_000;
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no address');
  return `http://127.0.0.1:${address.port}`;
}

/**
 * For a describe (or a file): a `start` that builds an app like {@link startApp} and closes every
 * app it built after each test.
 */
export function useApps(): typeof startApp {
  const apps: INestApplication[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });
  return async (...args) => {
    const app = await startApp(...args);
    apps.push(app);
    return app;
  };
}
