import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { MercuriusDriver, type MercuriusDriverConfig } from '@nestjs/mercurius';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import {
  type CanActivate,
  createParamDecorator,
  type ExecutionContext,
  Injectable,
  type INestApplication,
  UseGuards,
} from '@nestjs/common';
import { Args, Field, GqlExecutionContext, GraphQLModule, Int, Mutation, ObjectType, Query, Resolver } from '@nestjs/graphql';
import { Test, type TestingModule } from '@nestjs/testing';
import request from 'supertest';
import { IdempotencyException, Idempotent, idempotencyApolloPlugin, IdempotencyModule, InMemoryStore } from '../../lib/index.js';
import { until } from '../support/timing.js';
import { DuplicateWaiters } from '../../lib/core/waiting/duplicate.waiters.js';

@ObjectType()
class Refund {
  @Field()
  orderId!: string;
  @Field(() => Int)
  amount!: number;
  @Field(() => Int)
  run!: number;
  @Field()
  account!: string;
}

/** What the resolvers did; held runs wait for the test. */
@Injectable()
class Refunds {
  readonly runs = new Map<string, number>();
  hold: Promise<void> | undefined;
  failNext = false;

  async refund(field: string, orderId: string, amount: number, account: string): Promise<Refund> {
    const run = (this.runs.get(`${field}:${orderId}`) ?? 0) + 1;
    this.runs.set(`${field}:${orderId}`, run);
    await this.hold;
    if (this.failNext) {
      this.failNext = false;
      throw new Error('payment provider down');
    }
    return { orderId, amount, run, account };
  }
}

/** Bearer tokens to accounts, as an auth guard puts the caller on the GraphQL request's `req`. */
@Injectable()
class AuthGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    type Request = { headers: Record<string, string>; user?: object };
    const gql = GqlExecutionContext.create(context).getContext<{ req?: Request; reply?: { request: Request } }>();
    // Apollo's context has the request as req; Mercurius's has it on its reply.
    const req = gql.req ?? gql.reply!.request;
    req.user = { account: req.headers.authorization === 'Bearer bob' ? 'bob' : 'alice' };
    return true;
  }
}

const caller = (req: { user: { account: string } }) => req.user.account;

type Caller = { user: { account: string } };
/** The account the guard put on the GraphQL request. */
const GqlUser = createParamDecorator((_: unknown, context: ExecutionContext) => {
  const gql = GqlExecutionContext.create(context).getContext<{ req?: Caller; reply?: { request: Caller } }>();
  return (gql.req ?? gql.reply!.request).user.account;
});

@Resolver(() => Refund)
@UseGuards(AuthGuard)
class RefundsResolver {
  constructor(private readonly refunds: Refunds) {}

  @Query(() => String)
  health() {
    return 'ok';
  }

  @Mutation(() => Refund)
  @Idempotent({ identity: caller })
  refund(@Args('orderId') orderId: string, @Args('amount', { type: () => Int }) amount: number, @GqlUser() account: string) {
    return this.refunds.refund('refund', orderId, amount, account);
  }

  @Mutation(() => Refund)
  @Idempotent({ identity: caller })
  adjust(@Args('orderId') orderId: string, @Args('amount', { type: () => Int }) amount: number, @GqlUser() account: string) {
    return this.refunds.refund('adjust', orderId, amount, account);
  }

  /** A duplicate waits for the first run's answer instead of IDEMPOTENCY_KEY_IN_FLIGHT. */
  @Mutation(() => Refund)
  @Idempotent({ identity: caller, inFlight: 'wait', waitMs: 60_000 })
  refundWaiting(
    @Args('orderId') orderId: string,
    @Args('amount', { type: () => Int }) amount: number,
    @GqlUser() account: string,
  ) {
    return this.refunds.refund('refundWaiting', orderId, amount, account);
  }

  /** Its own IdempotencyException: reported as the field's error, not swallowed by the module's filter. */
  @Mutation(() => Refund)
  @Idempotent()
  busy(@Args('orderId') _orderId: string): Refund {
    throw new IdempotencyException(409, 'the ledger is busy');
  }

  /** Shopify-style: the key is an argument. */
  @Mutation(() => Refund)
  @Idempotent({ keyFrom: (args: { idempotencyKey?: string }) => args.idempotencyKey })
  refundWithKey(
    @Args('idempotencyKey') _key: string,
    @Args('orderId') orderId: string,
    @Args('amount', { type: () => Int }) amount: number,
  ) {
    return this.refunds.refund('refundWithKey', orderId, amount, '-');
  }
}

/** The GraphQL drivers under test: Apollo on Express (with the plugin), Mercurius on Fastify (header only). */
const DRIVERS = [
  {
    name: 'Apollo on Express',
    plugin: true,
    graphql: GraphQLModule.forRoot<ApolloDriverConfig>({
      driver: ApolloDriver,
      autoSchemaFile: true,
      plugins: [idempotencyApolloPlugin()],
      allowBatchedHttpRequests: true,
      context: ({ req, res }: { req: unknown; res: unknown }) => ({ req, res }),
    }),
    create: (module: TestingModule): INestApplication => module.createNestApplication({ logger: false }),
  },
  {
    name: 'Mercurius on Fastify',
    plugin: false,
    graphql: GraphQLModule.forRoot<MercuriusDriverConfig>({
      driver: MercuriusDriver,
      autoSchemaFile: true,
      allowBatchedQueries: true,
    }),
    create: (module: TestingModule): INestApplication =>
      module.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), { logger: false }),
  },
] as const;

type GraphqlAnswer = {
  status: number;
  replayedHeader: string | undefined;
  body: {
    data?: Record<string, unknown> | null;
    errors?: { message: string; path?: string[]; extensions: Record<string, unknown> }[];
    extensions?: object;
  };
};

describe.each(DRIVERS.map((d) => [d.name, d] as const))('@Idempotent() on GraphQL mutations (%s)', (_, driver) => {
  let app: INestApplication;
  let refunds: Refunds;
  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ store: new InMemoryStore() }), driver.graphql],
      providers: [RefundsResolver, Refunds, AuthGuard],
    }).compile();
    app = driver.create(moduleRef);
    await app.init();
    if (driver.name === 'Mercurius on Fastify') await (app as NestFastifyApplication).getHttpAdapter().getInstance().ready();
    refunds = app.get(Refunds);
  });
  /** The response's extensions on a replay: the plugin's entry on Apollo, none on Mercurius. */
  const replayed = (...fields: string[]) => (driver.plugin ? { extensions: { idempotency: { replayed: fields } } } : {});
  afterAll(async () => {
    await app?.close();
  });

  const gql = async (query: string, headers: Record<string, string> = {}): Promise<GraphqlAnswer> => {
    const res = await request(app.getHttpServer()).post('/graphql').set(headers).send({ query });
    return {
      status: res.status,
      replayedHeader: res.headers['idempotent-replayed'],
      body: res.body as GraphqlAnswer['body'],
    };
  };
  const refund = (key: string | undefined, orderId: string, amount = 5, selection = 'orderId amount run account', extra = {}) =>
    gql(`mutation Pay { refund(orderId: "${orderId}", amount: ${amount}) { ${selection} } }`, {
      ...(key && { 'idempotency-key': key }),
      ...extra,
    });

  it('a retry with the same key gets the same data, marked replayed; the resolver ran once', async () => {
    const first = await refund('k-1', 'o-1');
    expect(first.body).toEqual({ data: { refund: { orderId: 'o-1', amount: 5, run: 1, account: 'alice' } } });
    expect(first.replayedHeader).toBeUndefined();
    const retry = await refund('k-1', 'o-1');
    expect(retry.body).toEqual({ ...first.body, ...replayed('refund') });
    expect(retry.replayedHeader).toBe('true');
    expect(refunds.runs.get('refund:o-1')).toBe(1);
  });

  it('the fingerprint is the field and its arguments: another operation name, other fields selected, an alias — still the same call', async () => {
    await refund('k-2', 'o-2');
    const other = await gql('mutation Other { again: refund(amount: 5, orderId: "o-2") { run } }', { 'idempotency-key': 'k-2' });
    expect(other.body).toEqual({ data: { again: { run: 1 } }, ...replayed('again') });
    expect(refunds.runs.get('refund:o-2')).toBe(1);
  });

  it('the same key with other arguments is IDEMPOTENCY_KEY_REUSED, and the key is never echoed', async () => {
    await refund('k-3-secret', 'o-3');
    const reused = await refund('k-3-secret', 'o-3', 6);
    expect(reused.body.data).toBeNull();
    expect(reused.body.errors).toEqual([
      {
        message: 'idempotency-key was already used for a different request',
        locations: [{ line: 1, column: 16 }],
        path: ['refund'],
        extensions: { code: 'IDEMPOTENCY_KEY_REUSED', status: 422, retryable: false },
      },
    ]);
    expect(JSON.stringify(reused.body)).not.toContain('k-3-secret');
  });

  it('keys are per caller: the same key from another account is another record', async () => {
    await refund('k-4', 'o-4');
    const bob = await refund('k-4', 'o-4', 5, 'run account', { authorization: 'Bearer bob' });
    expect(bob.body).toEqual({ data: { refund: { run: 2, account: 'bob' } } });
  });

  it('without a key: IDEMPOTENCY_KEY_MISSING, and the resolver does not run', async () => {
    const missing = await refund(undefined, 'o-5');
    expect(missing.body.errors?.[0]).toMatchObject({
      message: 'idempotency-key header is required',
      extensions: { code: 'IDEMPOTENCY_KEY_MISSING', status: 400, retryable: false },
    });
    expect(refunds.runs.has('refund:o-5')).toBe(false);
  });

  it('a duplicate while the first runs is IDEMPOTENCY_KEY_IN_FLIGHT (retryable); a thrown error frees the key', async () => {
    let release!: () => void;
    refunds.hold = new Promise<void>((r) => (release = r));
    const first = refund('k-6', 'o-6');
    await until(() => refunds.runs.has('refund:o-6'));
    const duplicate = await refund('k-6', 'o-6');
    expect(duplicate.body.errors?.[0].extensions).toEqual({ code: 'IDEMPOTENCY_KEY_IN_FLIGHT', status: 409, retryable: true });
    refunds.failNext = true;
    release();
    refunds.hold = undefined;
    expect((await first).body.errors?.[0].message).toBe('payment provider down');
    expect((await refund('k-6', 'o-6')).body).toEqual({
      data: { refund: { orderId: 'o-6', amount: 5, run: 2, account: 'alice' } },
    });
  });

  it("with inFlight: 'wait', a duplicate while the first runs waits and gets the first's data, marked replayed", async () => {
    let release!: () => void;
    refunds.hold = new Promise<void>((r) => (release = r));
    const mutation = 'mutation Pay { refundWaiting(orderId: "o-w", amount: 5) { orderId run } }';
    const first = gql(mutation, { 'idempotency-key': 'k-w' });
    await until(() => refunds.runs.has('refundWaiting:o-w'));
    const duplicate = gql(mutation, { 'idempotency-key': 'k-w' });
    await until(() => app.get(DuplicateWaiters).size === 1);
    release();
    refunds.hold = undefined;
    const data = { data: { refundWaiting: { orderId: 'o-w', run: 1 } } };
    expect((await first).body).toEqual(data);
    expect((await duplicate).body).toEqual({ ...data, ...replayed('refundWaiting') });
    expect(refunds.runs.get('refundWaiting:o-w')).toBe(1);
  });

  it('two mutations of one document under one key header: each field has a record of its own', async () => {
    const both = 'mutation Both { refund(orderId: "o-7", amount: 1) { run } adjust(orderId: "o-7", amount: 1) { run } }';
    expect((await gql(both, { 'idempotency-key': 'k-7' })).body).toEqual({ data: { refund: { run: 1 }, adjust: { run: 1 } } });
    expect((await gql(both, { 'idempotency-key': 'k-7' })).body).toEqual({
      data: { refund: { run: 1 }, adjust: { run: 1 } },
      ...replayed('refund', 'adjust'),
    });
  });

  // Issue 49 item 2: ~1,800 aliased mutations in one 100 KB request, each a claim and a record.
  it('one request runs at most maxMutationsPerRequest (10) keyed mutations; the rest are refused unrun with their own code', async () => {
    const fields = Array.from(
      { length: 12 },
      (_, i) => `m${i}: refundWithKey(idempotencyKey: "flood-${i}", orderId: "flood-${i}", amount: 1) { run }`,
    );
    const answer = await gql(`mutation Flood { ${fields.join(' ')} }`);
    const codes = (answer.body.errors ?? []).map((e) => [e.path?.[0], e.extensions.code]);
    // The field is non-null: its error nulls the data, and execution ends there.
    expect(codes).toEqual([['m10', 'IDEMPOTENCY_TOO_MANY_MUTATIONS']]);
    expect(Array.from({ length: 12 }, (_, i) => refunds.runs.get(`refundWithKey:flood-${i}`) ?? 0)).toEqual([
      1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0,
    ]);
    // The count is per request: the next request runs its own ten.
    expect((await gql(`mutation One { ${fields[11]} }`)).body).toEqual({ data: { m11: { run: 1 } } });
  });

  // Issue 44 item 9: the second operation of a batch got IDEMPOTENCY_KEY_IN_FLIGHT.
  it('the same mutation twice in one batched request under one key: the second gets the data of the first, as in one document', async () => {
    const operation = { query: 'mutation Pay { refund(orderId: "o-batch", amount: 3) { orderId amount run } }' };
    const res = await request(app.getHttpServer())
      .post('/graphql')
      .set('idempotency-key', 'k-batch')
      .send([operation, operation]);
    const data = { refund: { orderId: 'o-batch', amount: 3, run: 1 } };
    expect((res.body as { data?: unknown; errors?: unknown }[]).map((r) => ({ data: r.data, errors: r.errors }))).toEqual([
      { data, errors: undefined },
      { data, errors: undefined },
    ]);
    expect(refunds.runs.get('refund:o-batch')).toBe(1);
  });

  it('keyFrom reads the key from an argument (Shopify style); without it the mutation is refused', async () => {
    const withKey = (key: string) =>
      gql(`mutation { refundWithKey(idempotencyKey: "${key}", orderId: "o-8", amount: 2) { run } }`);
    expect((await withKey('arg-1')).body).toEqual({ data: { refundWithKey: { run: 1 } } });
    expect((await withKey('arg-1')).body.data).toEqual({ refundWithKey: { run: 1 } });
    expect((await withKey('')).body.errors?.[0]).toMatchObject({
      message: 'the mutation has no idempotency key in the argument its keyFrom reads',
      extensions: { code: 'IDEMPOTENCY_KEY_MISSING' },
    });
  });

  it("the resolver's own IdempotencyException is the field's error", async () => {
    const busy = await gql('mutation { busy(orderId: "o-9") { run } }', { 'idempotency-key': 'k-9' });
    expect(busy.body.errors?.map((e) => e.message)).toEqual(['the ledger is busy']);
  });

  it('a query is not touched', async () => {
    expect((await gql('{ health }')).body).toEqual({ data: { health: 'ok' } });
  });
});
