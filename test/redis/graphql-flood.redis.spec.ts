import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { type INestApplication, Injectable } from '@nestjs/common';
import { Args, Field, GraphQLModule, Mutation, ObjectType, Query, Resolver } from '@nestjs/graphql';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import request from 'supertest';
import { type IdempotencyStore, Idempotent, IdempotencyModule, InMemoryStore, RedisStore } from '../../lib/index.js';
import { RedisServer, redisAvailable } from '../support/redis-server.js';

@ObjectType()
class Charge {
  @Field()
  id!: string;
}

/** Runs per charge id: a second run of one is the double charge the module exists to prevent. */
@Injectable()
class Ledger {
  readonly runs = new Map<string, number>();
}

@Resolver(() => Charge)
class ChargesResolver {
  constructor(private readonly ledger: Ledger) {}

  @Query(() => String)
  health() {
    return 'ok';
  }

  @Mutation(() => Charge, { nullable: true })
  @Idempotent({ keyFrom: (args: { key: string }) => args.key })
  charge(@Args('key') key: string): Charge {
    this.ledger.runs.set(key, (this.ledger.runs.get(key) ?? 0) + 1);
    return { id: key };
  }
}

async function app(store: IdempotencyStore): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({
    imports: [
      IdempotencyModule.forRoot({ store }),
      GraphQLModule.forRoot<ApolloDriverConfig>({
        driver: ApolloDriver,
        autoSchemaFile: true,
        context: ({ req, res }: { req: unknown; res: unknown }) => ({ req, res }),
      }),
    ],
    providers: [ChargesResolver, Ledger],
  }).compile();
  const nest = moduleRef.createNestApplication({ logger: false });
  await nest.init();
  return nest;
}

/** One request of `count` aliased keyed mutations, about 60 bytes each: 300 fit in 18 KB. */
const flood = (nest: INestApplication, prefix: string, count: number) =>
  request(nest.getHttpServer())
    .post('/graphql')
    .send({
      query: `mutation { ${Array.from({ length: count }, (_, i) => `m${i}: charge(key: "${prefix}-${i}") { id }`).join(' ')} }`,
    });

const charge = (nest: INestApplication, key: string) =>
  request(nest.getHttpServer())
    .post('/graphql')
    .send({ query: `mutation { charge(key: "${key}") { id } }` });

// Issue 49 item 2: one request under Nest's 100 KB body limit carried ~1,800 aliased idempotent
// mutations, each a claim and a record: on InMemoryStore with maxEntries 300 one 18 KB request evicted
// another user's completed record, whose retry ran the resolver again; on Redis one request left
// ~1,800 records for the TTL.
describe('one GraphQL request of hundreds of aliased idempotent mutations', () => {
  it('on InMemoryStore (maxEntries 300): runs 10 of them, and another client’s completed record still replays', async () => {
    const nest = await app(new InMemoryStore({ maxEntries: 300 }));
    try {
      const ledger = nest.get(Ledger);
      expect((await charge(nest, 'victim')).body).toEqual({ data: { charge: { id: 'victim' } } });
      const answer = await flood(nest, 'flood', 300);
      const refused = (answer.body as { errors: { extensions: { code: string } }[] }).errors;
      expect(refused).toHaveLength(290);
      expect(new Set(refused.map((e) => e.extensions.code))).toEqual(new Set(['IDEMPOTENCY_TOO_MANY_MUTATIONS']));
      expect([...ledger.runs.keys()].filter((k) => k.startsWith('flood-'))).toHaveLength(10);
      // The victim's retry replays: its record was not evicted, the resolver did not run again.
      expect((await charge(nest, 'victim')).body).toEqual({ data: { charge: { id: 'victim' } } });
      expect(ledger.runs.get('victim')).toBe(1);
    } finally {
      await nest.close();
    }
  }, 60_000);

  describe.each(redisAvailable('GraphQL flood on Redis') ? [['RedisStore']] : [])('on %s', () => {
    let server: RedisServer;
    beforeAll(async () => {
      server = await RedisServer.start();
    });
    afterAll(async () => {
      await server?.stop();
    });

    it('leaves 10 records for the TTL, not one per alias', async () => {
      const nest = await app(new RedisStore({ url: server.url }));
      const redis = new Redis(server.url);
      try {
        await flood(nest, 'redis-flood', 300);
        const keys = await redis.keys('idem:*redis-flood-*');
        expect(keys).toHaveLength(10);
      } finally {
        redis.disconnect();
        await nest.close();
      }
    }, 60_000);
  });
});
