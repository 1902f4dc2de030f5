import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import type { INestApplication } from '@nestjs/common';
import {
  Args,
  createUnionType,
  Field,
  GraphQLISODateTime,
  GraphQLModule,
  Int,
  Mutation,
  ObjectType,
  Parent,
  Query,
  registerEnumType,
  ResolveField,
  Resolver,
} from '@nestjs/graphql';
import { MercuriusDriver, type MercuriusDriverConfig } from '@nestjs/mercurius';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test, type TestingModule } from '@nestjs/testing';
import { GraphQLScalarType } from 'graphql';
import request from 'supertest';
import { Idempotent, IdempotencyModule, InMemoryStore } from '../../lib/index.js';

// Issue 44, item 8: the resolver ran once, and every retry of the key got `data: null` and an error
// for the whole TTL — a `Date` behind the `DateTime` scalar, a `@ResolveField` calling a method of the
// returned entity. What the client received for the field is what a retry receives, on both drivers.

/** A BigInt scalar that writes strings and, as such scalars do, refuses anything but a bigint. */
const BigIntString = new GraphQLScalarType({
  name: 'BigIntString',
  serialize: (value) => {
    if (typeof value !== 'bigint') throw new TypeError(`BigIntString cannot represent ${typeof value}`);
    return value.toString();
  },
});
/** Any JSON, as graphql-type-json's. */
const Json = new GraphQLScalarType({ name: 'JSON', serialize: (value) => value });

enum Status {
  Paid = 'paid-internal',
  Pending = 'pending-internal',
}
registerEnumType(Status, { name: 'Status' });

@ObjectType()
class Line {
  @Field()
  sku!: string;
  @Field(() => Int, { nullable: true })
  qty!: number | null;
}

@ObjectType()
class Money {
  @Field(() => Int)
  cents!: number;
  @Field()
  currency!: string;
}

/** What the resolver returns: an entity whose amount a field resolver reads through a method. */
class PaymentEntity {
  constructor(
    readonly id: string,
    private readonly minor: number,
    readonly at: Date,
    readonly big: bigint,
  ) {}
  readonly meta = { tags: ['a', 'b'], nested: { ok: true } };
  readonly lines = [
    { sku: 'sku-1', qty: 2 },
    { sku: 'sku-2', qty: null },
  ];
  readonly note = null;
  readonly status = Status.Paid;
  /** A back-reference, as an ORM entity has: JSON cannot hold the entity, the client's output has no cycle. */
  readonly account = { payments: [this] };
  cents(): number {
    return this.minor;
  }
}

@ObjectType('Payment')
class Payment {
  @Field()
  id!: string;
  @Field(() => GraphQLISODateTime)
  at!: Date;
  @Field(() => BigIntString)
  big!: bigint;
  @Field(() => Json)
  meta!: object;
  @Field(() => [Line])
  lines!: Line[];
  @Field(() => String, { nullable: true })
  note!: string | null;
  @Field(() => Status)
  status!: Status;
}

@ObjectType()
class Declined {
  @Field()
  reason!: string;
}

const Outcome = createUnionType({
  name: 'Outcome',
  types: () => [Payment, Declined] as const,
  resolveType: (value: object) => (value instanceof PaymentEntity ? Payment : Declined),
});

const runs = new Map<string, number>();
const ran = (name: string) => runs.set(name, (runs.get(name) ?? 0) + 1);

@Resolver(() => Payment)
class PaymentsResolver {
  @Query(() => String)
  health() {
    return 'ok';
  }

  @Mutation(() => Payment)
  @Idempotent()
  pay(@Args('id') id: string, @Args('amount', { type: () => Int }) amount: number): PaymentEntity {
    ran(id);
    return new PaymentEntity(id, amount, new Date(Date.UTC(2026, 11, 7, 3, 4, 5)), 2n ** 70n + BigInt(runs.get(id)!));
  }

  @Mutation(() => Outcome)
  @Idempotent()
  settle(@Args('id') id: string, @Args('ok') ok: boolean): PaymentEntity | Declined {
    ran(id);
    return ok ? new PaymentEntity(id, 7, new Date(0), 1n) : { reason: `declined #${runs.get(id)}` };
  }

  @ResolveField(() => Money)
  money(@Parent() payment: PaymentEntity): Money {
    return { cents: payment.cents(), currency: 'EUR' };
  }

  @ResolveField(() => String, { nullable: true })
  receipt(@Parent() payment: PaymentEntity): string {
    throw new Error(`receipt service down for ${payment.id}`);
  }
}

const DRIVERS = [
  {
    name: 'Apollo on Express',
    graphql: GraphQLModule.forRoot<ApolloDriverConfig>({
      driver: ApolloDriver,
      autoSchemaFile: true,
      resolvers: { JSON: Json, BigIntString },
    }),
    create: (module: TestingModule): INestApplication => module.createNestApplication({ logger: false }),
  },
  {
    name: 'Mercurius on Fastify',
    graphql: GraphQLModule.forRoot<MercuriusDriverConfig>({
      driver: MercuriusDriver,
      autoSchemaFile: true,
      resolvers: { JSON: Json, BigIntString },
    }),
    create: (module: TestingModule): INestApplication =>
      module.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), { logger: false }),
  },
] as const;

const PAY = `mutation Pay($id: String!, $amount: Int!, $lines: Boolean!) {
  pay(id: $id, amount: $amount) { ...Fields lines @include(if: $lines) { sku qty } m: money { cents currency } receipt }
}
fragment Fields on Payment { id at big meta note status __typename }`;

describe.each(DRIVERS.map((d) => [d.name, d] as const))(
  'GraphQL replays answer what the first request received (%s)',
  (_, driver) => {
    let app: INestApplication;
    /** Keys and ids of this driver (a key has no spaces). */
    const tag = driver.name.split(' ')[0];
    beforeAll(async () => {
      const moduleRef = await Test.createTestingModule({
        imports: [IdempotencyModule.forRoot({ store: new InMemoryStore() }), driver.graphql],
        providers: [PaymentsResolver],
      }).compile();
      app = driver.create(moduleRef);
      await app.init();
      if (driver.name === 'Mercurius on Fastify') await (app as NestFastifyApplication).getHttpAdapter().getInstance().ready();
    });
    afterAll(async () => {
      await app?.close();
    });

    const post = async (key: string, query: string, variables: object = {}) => {
      const res = await request(app.getHttpServer()).post('/graphql').set('idempotency-key', key).send({ query, variables });
      const body = res.body as { data?: Record<string, unknown> | null; errors?: { message: string; path?: unknown[] }[] };
      return { text: JSON.stringify({ data: body.data, errors: body.errors }), body };
    };

    it('custom scalars (DateTime, JSON, BigInt as a string), an enum, lists, nulls, a fragment, variables, an alias, a @ResolveField on an entity with a cycle, a field resolver that fails: the retry gets the same bytes', async () => {
      const variables = { id: `p-${tag}`, amount: 1250, lines: true };
      const first = await post(`k-pay-${tag}`, PAY, variables);
      expect(first.body.data).toEqual({
        pay: {
          id: variables.id,
          at: '2026-12-07T03:04:05.000Z',
          big: (2n ** 70n + 1n).toString(),
          meta: { tags: ['a', 'b'], nested: { ok: true } },
          note: null,
          status: 'Paid',
          __typename: 'Payment',
          lines: [
            { sku: 'sku-1', qty: 2 },
            { sku: 'sku-2', qty: null },
          ],
          m: { cents: 1250, currency: 'EUR' },
          receipt: null,
        },
      });
      expect(first.body.errors).toEqual([
        expect.objectContaining({ message: `receipt service down for ${variables.id}`, path: ['pay', 'receipt'] }),
      ]);
      for (let i = 0; i < 2; i++) {
        const retry = await post(`k-pay-${tag}`, PAY, variables);
        expect(retry.text).toBe(first.text);
      }
      expect(runs.get(variables.id)).toBe(1);
    });

    it('a union: the retry resolves to the type the first answer had', async () => {
      const query = `mutation S($id: String!, $ok: Boolean!) {
      settle(id: $id, ok: $ok) { __typename ... on Payment { id at m: money { cents } } ... on Declined { reason } }
    }`;
      for (const ok of [true, false]) {
        const id = `s-${ok}-${tag}`;
        const first = await post(`k-${id}`, query, { id, ok });
        expect(first.body.errors).toBeUndefined();
        const retry = await post(`k-${id}`, query, { id, ok });
        expect(retry.text).toBe(first.text);
        expect(runs.get(id)).toBe(1);
      }
    });

    it('a retry that selects a field the first did not is told so for that field; the rest is replayed', async () => {
      const id = `sel-${tag}`;
      await post(`k-${id}`, `mutation { pay(id: "${id}", amount: 3) { id } }`);
      const retry = await post(`k-${id}`, `mutation { pay(id: "${id}", amount: 3) { id note } }`);
      expect(retry.body.data).toEqual({ pay: { id, note: null } });
      expect(retry.body.errors).toEqual([
        expect.objectContaining({
          message: 'note was not selected when this key was first used: a retry gets the fields the first request selected',
          path: ['pay', 'note'],
        }),
      ]);
      expect(runs.get(id)).toBe(1);
    });
  },
);
