import 'reflect-metadata';
import {
  type CallHandler,
  Controller,
  Get,
  HttpCode,
  Injectable,
  Module,
  type NestInterceptor,
  Post,
  UseInterceptors,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import mysql from 'mysql2/promise';
import pg from 'pg';
import {
  type IdempotencyStore,
  IdempotencyModule,
  Idempotent,
  InMemoryStore,
  MySqlStore,
  PostgresStore,
  RedisStore,
  SqliteStore,
} from '../lib/index.js';
import type { MySqlPoolLike } from '../lib/stores/index.js';
import { PgTransactions } from '../test/support/pg-transactions.js';

/**
 * One benchmark variant in a process of its own: VARIANT = bare | noop | undecorated | memory | redis | postgres |
 * postgres-tx | mysql | sqlite, or fastify-<one of them> for the Fastify adapter; PORT, REDIS_URL, PG_URL, SQLITE_FILE. The same trivial handler in each
 * (POST /hold never answers, for duplicates in flight; postgres-tx: `transactional: true`, in a transaction of a node-postgres port); GET /stats reports
 * handler runs, the process's CPU time and, for postgres and postgres-tx, the statements their pool
 * and its clients ran (one round trip each).
 */
const fastify = process.env.VARIANT?.startsWith('fastify-') ?? false;
// `fastify-memory` is `memory` on the Fastify adapter.
const variant = (process.env.VARIANT ?? 'bare').replace(/^fastify-/, '');
let runs = 0;
let queries = 0;

@Controller()
class StatsController {
  @Get('stats')
  stats() {
    const cpu = process.cpuUsage();
    return { runs, cpuMicros: cpu.user + cpu.system, queries };
  }
}

@Controller()
class BareController {
  @Post('tx')
  @HttpCode(201)
  create() {
    return { txId: `tx-${++runs}` };
  }
}

@Controller()
class IdempotentController {
  @Post('tx')
  @HttpCode(201)
  @Idempotent()
  create() {
    return { txId: `tx-${++runs}` };
  }

  /** Never answers: the `conflict` workload sends its key while the first request is still in flight. */
  @Post('hold')
  @Idempotent()
  hold() {
    runs++;
    return new Promise<never>(() => undefined);
  }
}

/** In `undecorated`, beside the bare route: one request to it puts the recorder in place (Express: its stand-ins). */
@Controller()
class WarmController {
  @Post('warm')
  @Idempotent()
  warm() {
    return { warm: true };
  }
}

@Controller()
class TransactionalController {
  @Post('tx')
  @HttpCode(201)
  @Idempotent({ transactional: true })
  create() {
    return { txId: `tx-${++runs}` };
  }
}

/** Does nothing: the cost of Nest's interceptor pipeline alone, the floor under any interceptor. */
@Injectable()
class NoopInterceptor implements NestInterceptor {
  intercept(_: unknown, next: CallHandler) {
    return next.handle();
  }
}

@Controller()
class NoopController {
  @Post('tx')
  @HttpCode(201)
  @UseInterceptors(NoopInterceptor)
  create() {
    return { txId: `tx-${++runs}` };
  }
}

function controller() {
  // `undecorated`: the bare route in an application that imports the module and has a decorated route
  // (Express: the recorder's stand-ins are on its response prototype; Fastify: its onSend hook runs).
  if (variant === 'bare' || variant === 'undecorated') return BareController;
  if (variant === 'noop') return NoopController;
  if (variant === 'postgres-tx') return TransactionalController;
  return IdempotentController;
}

function imports() {
  if (variant === 'bare' || variant === 'noop') return [];
  if (variant === 'postgres-tx') {
    const pool = countedPool();
    // A table of its own: the replay key of the run must not meet the plain postgres variant's record.
    const cache = new PostgresStore({ pool, tableName: 'idempotency_tx' });
    return [IdempotencyModule.forRoot({ store: cache, transactions: new PgTransactions(pool) })];
  }
  if (variant === 'memory-quiet') return [IdempotencyModule.forRoot({ store: store(), openTelemetry: false })];
  if (variant === 'memory-sealed') {
    const encryption = { keys: { bench: Buffer.alloc(32, 7) }, current: 'bench' };
    return [IdempotencyModule.forRoot({ store: store(), openTelemetry: false, encryption })];
  }
  if (variant === 'memory-wait') {
    return [IdempotencyModule.forRoot({ store: store(), openTelemetry: false, inFlight: 'wait' })];
  }
  if (variant === 'redis-wait') return [IdempotencyModule.forRoot({ store: store(), inFlight: 'wait' })];
  if (variant === 'memory-events') {
    return [IdempotencyModule.forRoot({ store: store(), openTelemetry: false, events: () => undefined })];
  }
  return [IdempotencyModule.forRoot({ store: store() })];
}

/** A pool that counts every statement, its own and its clients' (BEGIN, the completion, COMMIT). */
function countedPool(): pg.Pool {
  const pool = new pg.Pool({ connectionString: process.env.PG_URL, max: Number(process.env.PG_POOL_SIZE ?? 4) });
  const query = pool.query.bind(pool) as (config: object) => Promise<never>;
  const connect = pool.connect.bind(pool) as () => Promise<pg.PoolClient>;
  return Object.assign(Object.create(pool) as pg.Pool, {
    query: (config: object) => {
      queries++;
      return query(config);
    },
    connect: async () => {
      const client = await connect();
      const clientQuery: (...args: unknown[]) => Promise<never> = client.query.bind(client);
      return Object.assign(Object.create(client) as pg.PoolClient, {
        query: (...args: unknown[]) => {
          queries++;
          return clientQuery(...args);
        },
        release: (err?: Error | boolean) => client.release(err),
      });
    },
  });
}

/** A mysql2 pool that counts every statement the store sends. */
function countedMySqlPool(): MySqlPoolLike {
  const pool = mysql.createPool({ uri: process.env.MYSQL_URL, connectionLimit: 4 });
  return {
    execute: (options, values?: unknown[]) => {
      queries++;
      return pool.execute(options, values as mysql.ExecuteValues);
    },
    query: (options, values?: unknown[]) => {
      queries++;
      return pool.query(options, values);
    },
    end: () => pool.end(),
  };
}

function store(): IdempotencyStore {
  if (variant === 'redis' || variant === 'redis-wait') return new RedisStore({ url: process.env.REDIS_URL! });
  if (variant === 'sqlite') return new SqliteStore({ filename: process.env.SQLITE_FILE! });
  if (variant === 'postgres') return new PostgresStore({ pool: countedPool() });
  if (variant === 'mysql') return new MySqlStore({ pool: countedMySqlPool() });
  // Room for every record of a run, so none is evicted (MAX_ENTRIES: a smaller store, to see what
  // the retained records cost the garbage collector).
  return new InMemoryStore({ maxEntries: Number(process.env.MAX_ENTRIES ?? 1_000_000) });
}

@Module({
  imports: imports(),
  controllers: [StatsController, controller(), ...(variant === 'undecorated' ? [WarmController] : [])],
})
class BenchModule {}

const app = fastify
  ? await NestFactory.create(BenchModule, new FastifyAdapter(), { logger: ['error'] })
  : await NestFactory.create(BenchModule, { logger: ['error'] });
await app.listen(Number(process.env.PORT), '127.0.0.1');
if (variant === 'undecorated') {
  const port = (app.getHttpServer() as import('node:http').Server).address() as import('node:net').AddressInfo;
  await fetch(`http://127.0.0.1:${port.port}/warm`, { method: 'POST', headers: { 'idempotency-key': 'warm' } });
}
process.send?.('ready');
// Exit normally on a signal, so that node --cpu-prof can write its profile.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(0));
