import { describe, expect, it } from '@jest/globals';
import {
  graphql,
  GraphQLBoolean,
  GraphQLEnumType,
  GraphQLError,
  GraphQLID,
  GraphQLInputObjectType,
  GraphQLInt,
  GraphQLInterfaceType,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  type GraphQLResolveInfo,
  GraphQLScalarType,
  GraphQLSchema,
  GraphQLString,
  GraphQLUnionType,
  Kind,
} from 'graphql';
import {
  fieldOutput,
  loadGraphqlJs,
  probeSchema,
  readOutput,
  storedOutput,
  TYPE_KEY,
} from '../../lib/transports/graphql/field-output.js';
import { replayField } from '../../lib/transports/graphql/field-replay.js';

// What a client receives for a mutation field, stored, and answered again through the schema: on a
// schema of graphql-js's own (no Nest), with the shapes that broke replays (issue 44, item 8).

/** A DateTime that serialises Dates only, as Nest's does (anything else: null). */
const DateTime = new GraphQLScalarType({
  name: 'DateTime',
  serialize: (v) => (v instanceof Date ? v.toISOString() : null),
  parseValue: (v) => new Date(String(v)),
  parseLiteral: (ast) => (ast.kind === Kind.STRING ? new Date(ast.value) : null),
});
const Status = new GraphQLEnumType({ name: 'Status', values: { PAID: { value: 0 }, PENDING: { value: 1 } } });

class Entity {
  constructor(
    readonly id: string,
    private readonly minor: number,
  ) {}
  readonly at = new Date(Date.UTC(2026, 0, 2, 3, 4, 5));
  readonly status = 0;
  readonly tags = ['a', null, 'c'];
  readonly note = null;
  readonly self = this;
  cents(): number {
    return this.minor;
  }
}

/** Implemented by Payment: reached from no field, so only the schema's whole type list brings Payment into a probe. */
const Charge = new GraphQLInterfaceType({ name: 'Charge', fields: { id: { type: new GraphQLNonNull(GraphQLID) } } });
const EchoFilter = new GraphQLInputObjectType({
  name: 'EchoFilter',
  fields: { from: { type: GraphQLString }, to: { type: GraphQLString } },
});

const Money = new GraphQLObjectType({
  name: 'Money',
  fields: { cents: { type: new GraphQLNonNull(GraphQLInt) }, currency: { type: GraphQLString } },
});
const Payment: GraphQLObjectType = new GraphQLObjectType({
  name: 'Payment',
  interfaces: [Charge],
  isTypeOf: (v) => v instanceof Entity,
  fields: () => ({
    /** The arguments exactly as the field got them: an argument left out is absent, not null. */
    echo: {
      type: GraphQLString,
      args: { values: { type: new GraphQLList(GraphQLString) }, filter: { type: EchoFilter }, note: { type: GraphQLString } },
      resolve: (_p: Entity, args: object) => JSON.stringify(args),
    },
    coded: {
      type: GraphQLString,
      resolve: () => {
        throw new GraphQLError('limit reached', { extensions: { code: 'LIMIT', retryAfter: 3 } });
      },
    },
    id: { type: new GraphQLNonNull(GraphQLID) },
    at: { type: DateTime },
    status: { type: Status },
    tags: { type: new GraphQLList(GraphQLString) },
    note: { type: GraphQLString },
    money: {
      type: Money,
      args: { currency: { type: GraphQLString } },
      resolve: (p: Entity, args: { currency?: string }) => ({ cents: p.cents(), currency: args.currency ?? 'EUR' }),
    },
    receipt: {
      type: GraphQLString,
      resolve: (p: Entity) => {
        throw new Error(`receipt of ${p.id} unavailable`);
      },
    },
    /** A non-null field that fails: graphql-js nulls the nearest nullable field above it. */
    audit: {
      type: new GraphQLObjectType({
        name: 'Audit',
        fields: {
          by: {
            type: new GraphQLNonNull(GraphQLString),
            resolve: () => {
              throw new Error('audit log down');
            },
          },
          at: { type: DateTime },
        },
      }),
      // Payment `a` has no audit (a null that is no error); the others' fails.
      resolve: (p: Entity) => (p.id === 'a' ? null : { at: p.at }),
    },
    self: { type: Payment },
  }),
});
const Declined = new GraphQLObjectType({ name: 'Declined', fields: { reason: { type: GraphQLString } } });
const Outcome = new GraphQLUnionType({
  name: 'Outcome',
  types: [Payment, Declined],
  resolveType: (v) => (v instanceof Entity ? 'Payment' : 'Declined'),
});

/** graphql-js's String serialiser before any replay hooked this schema. */
const builtinSerialize = GraphQLString.serialize;

/** Each mutation's stored output, by its name; `replay` answers from it instead of running. */
const stored = new Map<string, unknown>();
let replay = false;

function idempotent(run: (args: Record<string, unknown>) => unknown) {
  return async (_root: unknown, args: Record<string, unknown>, context: unknown, info: GraphQLResolveInfo) => {
    const js = await loadGraphqlJs();
    if (!replay) stored.set(info.fieldName, JSON.parse(JSON.stringify(await fieldOutput(js, run(args), info, context))));
    return replayField(js, stored.get(info.fieldName), info);
  };
}

const schema = new GraphQLSchema({
  query: new GraphQLObjectType({ name: 'Query', fields: { ok: { type: GraphQLString } } }),
  mutation: new GraphQLObjectType({
    name: 'Mutation',
    fields: {
      pay: {
        type: Payment,
        args: { id: { type: new GraphQLNonNull(GraphQLID) }, status: { type: Status }, after: { type: DateTime } },
        resolve: idempotent((a) => new Entity(String(a.id), a.status === 1 ? 99 : 1250)),
      },
      settle: {
        type: new GraphQLList(Outcome),
        resolve: idempotent(() => [new Entity('s-1', 7), { reason: 'card declined' }, null]),
      },
      count: { type: new GraphQLNonNull(GraphQLInt), resolve: idempotent(() => 3) },
      many: { type: new GraphQLList(Payment), resolve: idempotent(() => [new Entity('a', 1), new Entity('b', 2)]) },
      charge: { type: Charge, resolve: idempotent(() => new Entity('c-1', 4)) },
      strict: {
        type: new GraphQLNonNull(
          new GraphQLObjectType({
            name: 'Strict',
            fields: {
              by: {
                type: new GraphQLNonNull(GraphQLString),
                resolve: () => {
                  throw new Error('strict field down');
                },
              },
            },
          }),
        ),
        resolve: idempotent(() => ({})),
      },
      when: { type: DateTime, resolve: idempotent(() => new Date(0)) },
      state: { type: Status, resolve: idempotent(() => 1) },
    },
  }),
});

/** The mutation answered fresh, then twice from what the first stored: the three as graphql-js answers them. */
async function thrice(source: string, variableValues?: Record<string, unknown>) {
  replay = false;
  const first = JSON.stringify(await graphql({ schema, source, variableValues }));
  replay = true;
  const second = JSON.stringify(await graphql({ schema, source, variableValues }));
  const third = JSON.stringify(await graphql({ schema, source, variableValues }));
  return { first: JSON.parse(first) as Record<string, unknown>, same: first === second && second === third };
}

describe('a mutation field stored as the client received it, and answered again', () => {
  it('custom scalars, an enum with internal values, lists with nulls, a field resolver on an entity with a cycle, aliases, a fragment, variables: the same bytes', async () => {
    const { first, same } = await thrice(
      `mutation($id: ID!, $s: Status, $after: DateTime, $withTags: Boolean!) {
        pay(id: $id, status: $s, after: $after) { ...F t: tags @include(if: $withTags) eur: money { cents currency } usd: money(currency: "USD") { cents } self { id self { status } } }
      }
      fragment F on Payment { id at status note __typename }`,
      { id: 'p-1', s: 'PENDING', after: '2026-01-01T00:00:00Z', withTags: true },
    );
    expect(same).toBe(true);
    expect(first).toEqual({
      data: {
        pay: {
          id: 'p-1',
          at: '2026-01-02T03:04:05.000Z',
          status: 'PAID',
          note: null,
          __typename: 'Payment',
          t: ['a', null, 'c'],
          eur: { cents: 99, currency: 'EUR' },
          usd: { cents: 99 },
          self: { id: 'p-1', self: { status: 'PAID' } },
        },
      },
    });
    const kept = stored.get('pay') as Record<string, unknown>;
    expect(kept[TYPE_KEY]).toBe('Payment');
    expect(kept.at).toBe('2026-01-02T03:04:05.000Z');
  });

  it('an omitted variable leaves its argument out, as the request did', async () => {
    const { first, same } = await thrice('mutation($c: String) { pay(id: "p-2") { money(currency: $c) { currency } } }');
    expect(same).toBe(true);
    expect(first).toEqual({ data: { pay: { money: { currency: 'EUR' } } } });
  });

  it("field resolvers' errors come back where they were, the data nulled as graphql-js nulled it", async () => {
    const { first, same } = await thrice('mutation { pay(id: "p-3") { id receipt audit { at by } } }');
    expect(same).toBe(true);
    expect(first).toMatchObject({
      data: { pay: { id: 'p-3', receipt: null, audit: null } },
      errors: [
        { message: 'receipt of p-3 unavailable', path: ['pay', 'receipt'] },
        { message: 'audit log down', path: expect.arrayContaining(['pay', 'audit']) as unknown },
      ],
    });
  });

  it('a list of a union: each member resolves to the type the first answer had; a null stays null', async () => {
    const { first, same } = await thrice(
      'mutation { settle { __typename ... on Payment { id money { cents } } ... on Declined { reason } } }',
    );
    expect(same).toBe(true);
    expect(first).toEqual({
      data: {
        settle: [
          { __typename: 'Payment', id: 's-1', money: { cents: 7 } },
          { __typename: 'Declined', reason: 'card declined' },
          null,
        ],
      },
    });
  });

  it('a leaf mutation: a built-in scalar, a custom scalar and an enum', async () => {
    expect(await thrice('mutation { count }')).toEqual({ first: { data: { count: 3 } }, same: true });
    expect(await thrice('mutation { when }')).toEqual({ first: { data: { when: '1970-01-01T00:00:00.000Z' } }, same: true });
    expect(await thrice('mutation { state }')).toEqual({ first: { data: { state: 'PENDING' } }, same: true });
  });

  it('a field the first request did not select is an error of that field; the rest is answered', async () => {
    replay = false;
    await graphql({ schema, source: 'mutation { pay(id: "p-4") { id } }' });
    replay = true;
    const retry = await graphql({ schema, source: 'mutation { pay(id: "p-4") { id note } }' });
    expect(JSON.parse(JSON.stringify(retry))).toMatchObject({
      data: { pay: { id: 'p-4', note: null } },
      errors: [
        {
          message: 'note was not selected when this key was first used: a retry gets the fields the first request selected',
          path: ['pay', 'note'],
        },
      ],
    });
  });

  it("a record of the release before (the resolver's value as JSON) is answered by field name", async () => {
    stored.set('pay', { id: 'old', status: 'PAID', note: 'n', at: '2025-01-01T00:00:00.000Z' });
    replay = true;
    const retry = await graphql({ schema, source: 'mutation { pay(id: "old") { id note at } }' });
    expect(JSON.parse(JSON.stringify(retry))).toEqual({
      data: { pay: { id: 'old', note: 'n', at: '2025-01-01T00:00:00.000Z' } },
    });
  });

  it('values of other resolvers are untouched by the hooks: queries and plain objects resolve as before', async () => {
    const plain = new GraphQLSchema({
      query: new GraphQLObjectType({
        name: 'Query',
        fields: {
          pay: { type: Payment, resolve: () => new Entity('q', 5) },
          status: { type: Status, resolve: () => 1 },
          outcome: { type: Outcome, resolve: () => ({ reason: 'no funds' }) },
        },
      }),
    });
    const answer = await graphql({
      schema: plain,
      source: '{ pay { id at status money { cents } } status outcome { ... on Declined { reason } } }',
    });
    expect(JSON.parse(JSON.stringify(answer))).toEqual({
      data: {
        pay: { id: 'q', at: '2026-01-02T03:04:05.000Z', status: 'PAID', money: { cents: 5 } },
        status: 'PENDING',
        outcome: { reason: 'no funds' },
      },
    });
  });

  it('variables left out stay out of arguments, input objects and lists', async () => {
    const { first, same } = await thrice(
      `mutation($v: String, $note: String, $to: String) { pay(id: "p-5") { echo(values: [$v, "x"], filter: { from: $v, to: $to }, note: $note) } }`,
      { to: 'z' },
    );
    expect(same).toBe(true);
    expect(first).toEqual({ data: { pay: { echo: JSON.stringify({ values: [null, 'x'], filter: { to: 'z' } }) } } });
  });

  it("an error's extensions are kept and replayed; an error without is stored without", async () => {
    const { first, same } = await thrice('mutation { pay(id: "p-6") { coded receipt } }');
    expect(same).toBe(true);
    expect(first).toMatchObject({
      errors: [
        { message: 'limit reached', extensions: { code: 'LIMIT', retryAfter: 3 } },
        { message: 'receipt of p-6 unavailable' },
      ],
    });
    const kept = stored.get('pay') as { errors: object[] };
    expect(kept.errors).toEqual([
      { path: ['coded'], message: 'limit reached', extensions: { code: 'LIMIT', retryAfter: 3 } },
      { path: ['receipt'], message: 'receipt of p-6 unavailable' },
    ]);
  });

  it("a non-null field's error that nulls the mutation itself, and in a list a null that is no error beside one that is", async () => {
    const strict = await thrice('mutation { strict { by } }');
    expect(strict.same).toBe(true);
    expect(strict.first).toMatchObject({ data: null, errors: [{ message: 'strict field down' }] });
    const many = await thrice('mutation { many { id audit { by } } }');
    expect(many.same).toBe(true);
    expect(many.first).toMatchObject({
      data: {
        many: [
          { id: 'a', audit: null },
          { id: 'b', audit: null },
        ],
      },
      // Thrown again at the null it caused (the first answer is made from the stored output too).
      errors: [{ message: 'audit log down', path: ['many', 1, 'audit'] }],
    });
    expect((many.first.errors as object[]).length).toBe(1);
  });

  it("an interface: the replay resolves to the type the first answer had, which only the schema's type list brings in", async () => {
    const { first, same } = await thrice('mutation { charge { __typename id ... on Payment { money { cents } } } }');
    expect(same).toBe(true);
    expect(first).toEqual({ data: { charge: { __typename: 'Payment', id: 'c-1', money: { cents: 4 } } } });
  });

  it('a stored value that is no value replays as null; one probe schema per return type', async () => {
    replay = false;
    await graphql({ schema, source: 'mutation { when }' });
    stored.set('when', undefined);
    replay = true;
    expect(JSON.parse(JSON.stringify(await graphql({ schema, source: 'mutation { when }' })))).toEqual({ data: { when: null } });
    const js = await loadGraphqlJs();
    expect(probeSchema(js, schema, Payment)).toBe(probeSchema(js, schema, Payment));
  });

  it("hooks only what a replay needs: graphql-js's own scalars and the object types' type resolution stay as they were for other values", async () => {
    // Types of this test's own, so that the hooks are installed here and not by an earlier test.
    const Card = new GraphQLObjectType({
      name: 'Card',
      isTypeOf: (v: { card?: true }) => v.card === true,
      fields: { last4: { type: GraphQLString } },
    });
    const Bank = new GraphQLObjectType({
      name: 'Bank',
      isTypeOf: (v: { iban?: string }) => typeof v.iban === 'string',
      fields: { iban: { type: GraphQLString } },
    });
    /** No resolveType: graphql-js asks each member's isTypeOf. */
    const Method = new GraphQLUnionType({ name: 'Method', types: [Card, Bank] });
    /** Its own resolveType, which the default resolver could not replace (no member has isTypeOf for these). */
    const Plain = new GraphQLObjectType({ name: 'Plain', fields: { a: { type: GraphQLString } } });
    const Other = new GraphQLObjectType({ name: 'Other', fields: { b: { type: GraphQLString } } });
    const Either = new GraphQLUnionType({
      name: 'Either',
      types: [Plain, Other],
      resolveType: (v: { b?: string }) => (v.b ? 'Other' : 'Plain'),
    });
    const own = new GraphQLSchema({
      query: new GraphQLObjectType({
        name: 'Query',
        fields: {
          method: { type: Method, resolve: () => ({ iban: 'DE00' }) },
          // A value of the application's own may have a `typename` of its own: not the stored output's.
          either: { type: Either, resolve: () => ({ b: 'yes', typename: 'Plain' }) },
        },
      }),
      mutation: new GraphQLObjectType({
        name: 'Mutation',
        fields: {
          method: { type: Method, resolve: idempotent(() => ({ card: true, last4: '4242' })) },
          either: { type: Either, resolve: idempotent(() => ({ a: 'first' })) },
        },
      }),
    });
    replay = false;
    const source = 'mutation { method { ... on Card { last4 } } either { ... on Plain { a } } }';
    expect(JSON.parse(JSON.stringify(await graphql({ schema: own, source })))).toEqual({
      data: { method: { last4: '4242' }, either: { a: 'first' } },
    });
    expect(GraphQLString.serialize).toBe(builtinSerialize);
    expect('resolveType' in Card).toBe(false);
    const query = await graphql({ schema: own, source: '{ method { ... on Bank { iban } } either { ... on Other { b } } }' });
    expect(JSON.parse(JSON.stringify(query))).toEqual({ data: { method: { iban: 'DE00' }, either: { b: 'yes' } } });
  });

  it('the stored form: data alone without errors, data and errors with', () => {
    expect(storedOutput({ data: { a: 1 } })).toEqual({ a: 1 });
    expect(readOutput({ a: 1 })).toEqual({ data: { a: 1 } });
    const errors = [{ path: ['x'], message: 'm' }];
    expect(readOutput(storedOutput({ data: null, errors }))).toEqual({ data: null, errors });
    expect(readOutput(null)).toEqual({ data: null });
    expect(readOutput('text')).toEqual({ data: 'text' });
  });

  it('loads graphql-js once', async () => {
    expect(await loadGraphqlJs()).toBe(await loadGraphqlJs());
    expect(typeof (await loadGraphqlJs()).execute).toBe('function');
    expect(GraphQLBoolean.name).toBe('Boolean');
  });
});
