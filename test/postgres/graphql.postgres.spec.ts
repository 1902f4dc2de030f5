import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { Inject, Injectable, type INestApplication } from '@nestjs/common';
import { Args, Field, GraphQLModule, Int, Mutation, ObjectType, Query, Resolver } from '@nestjs/graphql';
import { MercuriusDriver, type MercuriusDriverConfig } from '@nestjs/mercurius';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test, type TestingModule } from '@nestjs/testing';
import pg from 'pg';
import request from 'supertest';
import { Idempotent, idempotencyApolloPlugin, IdempotencyModule, PostgresStore } from '../../lib/index.js';
import { PgTransactions } from '../support/pg-transactions.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { until } from '../support/timing.js';

const describePg = postgresAvailable('transactional GraphQL suite') ? describe : describe.skip;

@ObjectType()
class Refund {
  @Field(() => Int)
  id!: number;
  @Field(() => Int)
  amount!: number;
}

/** What the next resolver run does. */
@Injectable()
class Behaviour {
  failAfterWrite = false;
  hold: Promise<void> | undefined;
  runs = 0;
}

@Resolver(() => Refund)
class LedgerResolver {
  constructor(
    @Inject(PgTransactions) private readonly tx: PgTransactions,
    private readonly behaviour: Behaviour,
  ) {}

  @Query(() => String)
  health() {
    return 'ok';
  }

  // The resolver writes through the transaction the module opened, as a @Transactional() service would.
  @Mutation(() => Refund)
  @Idempotent({ transactional: true })
  async refund(@Args('orderId') orderId: string, @Args('amount', { type: () => Int }) amount: number): Promise<Refund> {
    this.behaviour.runs++;
    const { rows } = await this.tx.client.query<{ id: number }>(
      'INSERT INTO refunds (order_id, amount) VALUES ($1, $2) RETURNING id',
      [orderId, amount],
    );
    await this.behaviour.hold;
    if (this.behaviour.failAfterWrite) {
      this.behaviour.failAfterWrite = false;
      throw new Error('payment provider down');
    }
    return { id: rows[0].id, amount };
  }
}

const DRIVERS = [
  {
    name: 'Apollo on Express',
    graphql: () =>
      GraphQLModule.forRoot<ApolloDriverConfig>({
        driver: ApolloDriver,
        autoSchemaFile: true,
        plugins: [idempotencyApolloPlugin()],
      }),
    create: (module: TestingModule): INestApplication => module.createNestApplication({ logger: false }),
  },
  {
    name: 'Mercurius on Fastify',
    graphql: () => GraphQLModule.forRoot<MercuriusDriverConfig>({ driver: MercuriusDriver, autoSchemaFile: true }),
    create: (module: TestingModule): INestApplication =>
      module.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), { logger: false }),
  },
] as const;

let server: PostgresServer;
let databases = 0;

describePg('transactional GraphQL mutations on PostgreSQL', () => {
  beforeAll(async () => {
    server = await PostgresServer.start();
  });
  afterAll(async () => {
    await server?.destroy();
  });

  describe.each(DRIVERS.map((d) => [d.name, d] as const))('%s', (_, driver) => {
    let app: INestApplication;
    let pool: pg.Pool;
    let tx: PgTransactions;
    let behaviour: Behaviour;

    beforeAll(async () => {
      const url = await server.createDatabase(`graphql_${process.pid}_${++databases}`);
      pool = new pg.Pool({ connectionString: url, max: 6 });
      pool.on('error', () => undefined);
      await pool.query('CREATE TABLE refunds (id serial PRIMARY KEY, order_id text NOT NULL, amount int NOT NULL)');
      tx = new PgTransactions(pool);
      const moduleRef = await Test.createTestingModule({
        imports: [IdempotencyModule.forRoot({ store: new PostgresStore({ pool }), transactions: tx }), driver.graphql()],
        providers: [LedgerResolver, Behaviour, { provide: PgTransactions, useValue: tx }],
      }).compile();
      app = driver.create(moduleRef);
      await app.init();
      if (driver.name === 'Mercurius on Fastify') await (app as NestFastifyApplication).getHttpAdapter().getInstance().ready();
      behaviour = app.get(Behaviour);
    });
    afterAll(async () => {
      await app?.close();
      await pool?.end();
    });

    const refund = async (key: string, orderId: string, amount = 5) => {
      const res = await request(app.getHttpServer())
        .post('/graphql')
        .set('idempotency-key', key)
        .send({ query: `mutation { refund(orderId: "${orderId}", amount: ${amount}) { id amount } }` });
      return res.body as {
        data?: { refund: { id: number; amount: number } } | null;
        errors?: { message: string; extensions: object }[];
      };
    };
    const rows = async (orderId: string) =>
      (await pool.query<{ id: number }>('SELECT id FROM refunds WHERE order_id = $1 ORDER BY id', [orderId])).rows.map(
        (r) => r.id,
      );

    it("the record commits with the resolver's write: a retry gets the same data, and there is one row", async () => {
      const first = await refund('t-1', 'o-1');
      expect(first.data?.refund.amount).toBe(5);
      const retry = await refund('t-1', 'o-1');
      expect(retry.data).toEqual(first.data);
      expect(await rows('o-1')).toEqual([first.data!.refund.id]);
      expect(behaviour.runs).toBe(1);
      const [{ state }] = (await pool.query<{ state: number }>('SELECT state FROM idempotency_records')).rows;
      expect(state).toBe(1);
    });

    it('a resolver that throws after its write rolls the write back and frees the key: the retry writes once', async () => {
      behaviour.failAfterWrite = true;
      const failed = await refund('t-2', 'o-2');
      expect(failed.errors?.[0].message).toBe('payment provider down');
      expect(await rows('o-2')).toEqual([]);
      const retry = await refund('t-2', 'o-2');
      expect(retry.data?.refund.amount).toBe(5);
      expect(await rows('o-2')).toEqual([retry.data!.refund.id]);
    });

    it('a duplicate while the transaction is open is IDEMPOTENCY_KEY_IN_FLIGHT; a COMMIT refused writes nothing and frees the key', async () => {
      let release!: () => void;
      behaviour.hold = new Promise<void>((r) => (release = r));
      const runs = behaviour.runs;
      const first = refund('t-3', 'o-3');
      await until(() => behaviour.runs > runs);
      const duplicate = await refund('t-3', 'o-3');
      expect(duplicate.errors?.[0].extensions).toEqual({ code: 'IDEMPOTENCY_KEY_IN_FLIGHT', status: 409, retryable: true });
      // COMMIT refused and rolled back (a serialization failure): known not to have landed, so freed.
      tx.beforeCommit = () => {
        throw Object.assign(new Error('could not serialize access'), { code: '40001' });
      };
      release();
      behaviour.hold = undefined;
      const answered = await first;
      expect(answered.data).toBeNull();
      expect(answered.errors?.[0].extensions).toEqual({ code: 'IDEMPOTENCY_NOT_COMMITTED', status: 503, retryable: true });
      expect(await rows('o-3')).toEqual([]);
      const retry = await refund('t-3', 'o-3');
      expect(retry.data?.refund.amount).toBe(5);
      expect(await rows('o-3')).toEqual([retry.data!.refund.id]);
    });

    it('a COMMIT lost with its connection may have landed: the key stays claimed, a retry is IDEMPOTENCY_KEY_IN_FLIGHT', async () => {
      tx.beforeCommit = async (client) => {
        await pool.query('SELECT pg_terminate_backend($1)', [(client as unknown as { processID: number }).processID]);
      };
      const lost = await refund('t-4', 'o-4');
      expect(lost.errors?.[0].extensions).toEqual({ code: 'IDEMPOTENCY_NOT_COMMITTED', status: 503, retryable: true });
      expect((await refund('t-4', 'o-4')).errors?.[0].extensions).toMatchObject({ code: 'IDEMPOTENCY_KEY_IN_FLIGHT' });
    });
  });
});
