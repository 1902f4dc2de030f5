import 'reflect-metadata';
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { Controller, HttpCode, type MiddlewareConsumer, Module, type NestModule, Post, Req, Res } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  Args,
  Context,
  Field,
  GraphQLISODateTime,
  GraphQLModule,
  Int,
  Mutation,
  ObjectType,
  Query,
  Resolver,
} from '@nestjs/graphql';
import { MercuriusDriver, type MercuriusDriverConfig } from '@nestjs/mercurius';
import { MessagePattern, Payload, Transport } from '@nestjs/microservices';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { map, timer } from 'rxjs';
import {
  type IdempotencyEvent,
  IdempotencyInbox,
  IdempotencyModule,
  type IdempotencyStore,
  Idempotent,
  InMemoryStore,
  MySqlStore,
  PostgresStore,
  RedisStore,
  SqliteStore,
} from '../../lib/index.js';
import type { HistoryLine } from './history.js';
import { watchStalls } from './stalls.js';
import { WAIT_MS } from './workload.js';

// One pod of the fault-injection suite, in a process of its own: handlers of every surface — six HTTP
// routes of different shapes behind @Idempotent(), a GraphQL mutation (Apollo on the Express pod,
// Mercurius on the Fastify one), a route that runs its work through IdempotencyInbox, and a NATS
// request handler in a queue group — each run appended to a log shared by every pod of a run (one
// line per write, O_APPEND), and every idempotency event too, with the tenant and key of the request
// it belongs to. Environment: STORE (memory, redis, postgres, sqlite), STORE_URL (Redis or PostgreSQL
// URL, SQLite file), ADAPTER, POD, LOG, LEASE_MS, SLOW_MS, POOL_SIZE, NATS_URL (no NATS handler without).

const POD = process.env.POD ?? 'pod';
const LOG = process.env.LOG ?? '/dev/null';
const SLOW_MS = Number(process.env.SLOW_MS || 600);

interface RequestFacts {
  tenant: string;
  key: string;
}
const current = new AsyncLocalStorage<RequestFacts>();
// An event names its key only by the hash of the key as the client sent it (no tenant): the requests
// this pod has seen, by that hash. Two tenants may send one key, so a hash may name both.
const byHash = new Map<string, RequestFacts[]>();

function write(line: HistoryLine): void {
  appendFileSync(LOG, `${JSON.stringify(line)}\n`);
}

let runs = 0;

function header(req: { headers: Record<string, string | string[] | undefined> }, name: string): string {
  return String(req.headers[name] ?? '');
}

type Headers = { headers: Record<string, string | string[] | undefined> };
const factsOf = (req: Headers): RequestFacts => ({ tenant: header(req, 'x-tenant'), key: header(req, 'idempotency-key') });

/** Keeps which tenants sent a key, so that an event (which names the key by its hash) finds them. */
function seen(facts: RequestFacts): void {
  const hash = createHash('sha256').update(facts.key).digest('hex');
  const known = byHash.get(hash) ?? [];
  if (!known.some((c) => c.tenant === facts.tenant)) byHash.set(hash, [...known, facts]);
}

/** Logs the start and the end of one handler run and answers with what identifies it. */
async function run(req: Headers | RequestFacts, route: string, work: () => Promise<void>) {
  const runId = `${POD}#${++runs}`;
  const facts = 'headers' in req ? factsOf(req) : req;
  write({ t: 'run', runId, pod: POD, route, ...facts, at: Date.now() });
  try {
    await work();
  } catch (error) {
    write({ t: 'end', runId, outcome: 'threw', at: Date.now() });
    throw error;
  }
  write({ t: 'end', runId, outcome: 'returned', at: Date.now() });
  return { ...facts, route, runId };
}

const pause = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

@Controller('chaos')
class ChaosController {
  constructor(private readonly inbox: IdempotencyInbox) {}

  @Post('fast')
  @Idempotent()
  fast(@Req() req: never) {
    return run(req, 'fast', async () => undefined);
  }

  @Post('slow')
  @Idempotent()
  slow(@Req() req: never) {
    return run(req, 'slow', () => pause(SLOW_MS));
  }

  /** Throws half the time: the key is freed and the client's retry runs it again. */
  @Post('flaky')
  @Idempotent()
  flaky(@Req() req: never) {
    return run(req, 'flaky', async () => {
      await pause(50);
      if (Math.random() < 0.5) throw new Error('flaky handler failed');
    });
  }

  /** A 4xx the handler returns (a declined payment): stored and replayed like a success. */
  @Post('declined')
  @Idempotent()
  @HttpCode(402)
  declined(@Req() req: never) {
    return run(req, 'declined', () => pause(100));
  }

  /** A duplicate waits for the run (`inFlight: 'wait'`) and is answered its replay. */
  @Post('wait')
  @Idempotent({ inFlight: 'wait', waitMs: WAIT_MS })
  wait(@Req() req: never) {
    return run(req, 'wait', () => pause(SLOW_MS));
  }

  /** Work that is not a route of its own: IdempotencyInbox.run, scoped by the tenant, its duplicate answered its value. */
  @Post('inbox')
  async inboxed(@Req() req: Headers, @Res({ passthrough: true }) res: { header(name: string, value: string): unknown }) {
    const facts = factsOf(req);
    const done = await this.inbox.run(facts.key, { consumer: 'chaos.inbox', scope: facts.tenant }, () =>
      run(facts, 'inbox', () => pause(SLOW_MS / 2)),
    );
    if (done.duplicate) res.header('idempotent-replayed', 'true');
    return done.value;
  }

  /** A NATS request (a queue group spreads them over the pods): the key and the tenant come in the data. */
  @MessagePattern('chaos.nats')
  @Idempotent({ keyFrom: (data: RequestFacts) => data.key, scope: (data: RequestFacts) => data.tenant })
  nats(@Payload() data: RequestFacts) {
    const facts = { tenant: data.tenant, key: data.key };
    seen(facts);
    return current.run(facts, () => run(facts, 'nats', () => pause(SLOW_MS / 2)));
  }

  /** An Observable that emits after a pause. */
  @Post('stream')
  @Idempotent()
  stream(@Req() req: never) {
    const runId = `${POD}#${++runs}`;
    const facts = { tenant: header(req, 'x-tenant'), key: header(req, 'idempotency-key') };
    write({ t: 'run', runId, pod: POD, route: 'stream', ...facts, at: Date.now() });
    return timer(SLOW_MS / 2).pipe(
      map(() => {
        write({ t: 'end', runId, outcome: 'returned', at: Date.now() });
        return { ...facts, route: 'stream', runId };
      }),
    );
  }
}

@ObjectType()
class ChaosAnswer {
  @Field()
  tenant!: string;
  @Field()
  key!: string;
  @Field()
  route!: string;
  @Field()
  runId!: string;
  /** A Date behind Nest's DateTime scalar: what a replay must answer as the first answer had it (issue 44, item 8). */
  @Field(() => GraphQLISODateTime)
  at!: Date;
}

@Resolver()
class ChaosResolver {
  @Query(() => String)
  health() {
    return 'ok';
  }

  @Mutation(() => ChaosAnswer)
  @Idempotent()
  async charge(
    @Args('amount', { type: () => Int }) _amount: number,
    @Context() gql: { req?: Headers; reply?: { request: Headers } },
  ) {
    const answer = await run(gql.req ?? gql.reply!.request, 'graphql', () => pause(SLOW_MS / 2));
    return { ...answer, at: new Date(Number(answer.runId.split('#')[1])) };
  }
}

/** Apollo on the Express pod, Mercurius on the Fastify one, under the pods' base path. */
function graphql() {
  return process.env.ADAPTER === 'fastify'
    ? GraphQLModule.forRoot<MercuriusDriverConfig>({ driver: MercuriusDriver, autoSchemaFile: true, path: '/chaos/graphql' })
    : GraphQLModule.forRoot<ApolloDriverConfig>({
        driver: ApolloDriver,
        autoSchemaFile: true,
        path: '/chaos/graphql',
        context: ({ req, res }: { req: unknown; res: unknown }) => ({ req, res }),
      });
}

function store(): IdempotencyStore {
  const url = process.env.STORE_URL ?? '';
  switch (process.env.STORE) {
    case 'redis':
      return new RedisStore({ url });
    case 'postgres':
      return new PostgresStore({ connectionString: url, poolSize: Number(process.env.POOL_SIZE) || undefined });
    case 'sqlite':
      return new SqliteStore({ filename: url });
    case 'mysql':
      return new MySqlStore({ uri: url, poolSize: Number(process.env.POOL_SIZE) || undefined });
    default:
      return new InMemoryStore();
  }
}

function onEvent(event: IdempotencyEvent): void {
  const context = current.getStore();
  const candidates = (event.keyHash && byHash.get(event.keyHash)) || [];
  // A request's outcome is its context's when the context sent that key. A lease-lost event belongs to
  // no request: it is logged for every tenant that sent the key (over-excusing rather than missing).
  // An event whose context sent another key is logged under its own key, with the context that
  // betrays it (the checker flags that).
  const own = context && candidates.find((c) => c.tenant === context.tenant && c.key === context.key);
  const owners: (RequestFacts | undefined)[] = own ? [own] : candidates.length ? candidates : [undefined];
  for (const facts of owners)
    write({
      t: 'event',
      pod: POD,
      outcome: event.outcome,
      status: event.status,
      code: event.code,
      tenant: facts?.tenant,
      key: facts?.key,
      context: context && `${context.tenant}/${context.key}`,
      at: event.at,
    });
}

@Module({
  imports: [
    IdempotencyModule.forRoot({
      store: store(),
      leaseMs: Number(process.env.LEASE_MS || 1000),
      ttlMs: 3_600_000,
      identity: (req: { headers: Record<string, string | string[] | undefined> }) => header(req, 'x-tenant') || 'anonymous',
      events: onEvent,
    }),
    graphql(),
  ],
  controllers: [ChaosController],
  providers: [ChaosResolver],
})
class ChaosModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    consumer
      .apply((req: Headers, _res: unknown, next: () => void) => {
        const facts = factsOf(req);
        seen(facts);
        current.run(facts, next);
      })
      .forRoutes('*path');
  }
}

async function main(): Promise<void> {
  // A pod the machine starved for a third of a lease: the checker treats it like a paused pod (its
  // leases may lapse), not as the library's doing.
  watchStalls(Number(process.env.LEASE_MS || 1000) / 3, (from, at) => write({ t: 'stall', pod: POD, from, at }));
  const app =
    process.env.ADAPTER === 'fastify'
      ? await NestFactory.create(ChaosModule, new FastifyAdapter(), { logger: ['error', 'warn'] })
      : await NestFactory.create(ChaosModule, { logger: ['error', 'warn'] });
  app.enableShutdownHooks();
  if (process.env.NATS_URL) {
    app.connectMicroservice({ transport: Transport.NATS, options: { servers: [process.env.NATS_URL], queue: 'chaos-pods' } });
    await app.startAllMicroservices();
  }
  await app.listen(0, '127.0.0.1');
  const url = await app.getUrl();
  console.log(`chaos pod ${POD} on ${url.replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1')}`);
}

void main();
