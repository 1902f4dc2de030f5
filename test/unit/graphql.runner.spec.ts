import { describe, expect, it } from '@jest/globals';
import { type CallHandler, IntrinsicException } from '@nestjs/common';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host.js';
import { Args, Mutation, Resolver } from '@nestjs/graphql';
import { GraphqlRefusal } from '../../lib/shared/exceptions/graphql-refusal.exception.js';
import { buildSchema, type FieldNode, GraphQLNonNull, GraphQLString, type OperationDefinitionNode, parse } from 'graphql';
import { from, lastValueFrom, type Observable, of } from 'rxjs';
import { Idempotent, idempotencyApolloPlugin, type IdempotencyModuleOptions, InMemoryStore } from '../../lib/index.js';
import { GraphqlContext } from '../../lib/transports/graphql/graphql.context.js';
import type { ResolvedRouteOptions } from '../../lib/shared/interfaces/resolved-options.interface.js';
import { FakeResponse } from '../support/fake-response.js';
import { spyOnLogger } from '../support/logger.js';
import { createProtocol, destroyProtocolsAfterEach } from '../support/protocol.js';

@Resolver()
class Refunds {
  @Mutation(() => String)
  @Idempotent()
  refund(@Args('orderId') orderId: string) {
    return orderId;
  }

  @Mutation(() => String)
  @Idempotent({ missingHeader: 'pass-through' })
  note(@Args('text') text: string) {
    return text;
  }

  @Mutation(() => String)
  @Idempotent({ keyFrom: (args: { key?: string }) => args.key })
  withKey(@Args('key') key: string) {
    return key;
  }
}

const schema = buildSchema(
  'type Query { ok: String } type Mutation { refund(orderId: String): String note(text: String): String withKey(key: String): String }',
);

/** The resolve info graphql-js hands the resolver of `field`, answered under `key`. */
function infoFor(field: string, key: string) {
  const operation = parse(`mutation { ${key}: ${field} }`).definitions[0] as OperationDefinitionNode;
  const node = operation.selectionSet.selections[0] as FieldNode;
  return {
    fieldName: field,
    path: { key, prev: undefined, typename: 'Mutation' },
    schema,
    returnType: GraphQLString,
    parentType: schema.getMutationType(),
    fieldNodes: [node],
    fragments: {},
    variableValues: {},
    operation,
  };
}

type Gql = { req?: object; request?: object; res?: object; reply?: object & { request?: object } };

function setup(options: IdempotencyModuleOptions = {}, handler: 'refund' | 'note' | 'withKey' = 'refund', broken = false) {
  const { interceptor } = createProtocol({ store: new InMemoryStore(), ...options });
  const call = async (
    args: object,
    gql: Gql,
    handle: () => Observable<unknown> = () => of('ran'),
    key = 'refund',
    field: typeof handler = handler,
  ) => {
    const info = infoFor(field, key);
    // A schema the field's answer cannot be completed through (it fails where graphql-js reads it).
    if (broken)
      Object.assign(info, {
        schema: Object.assign(Object.create(schema) as typeof schema, {
          getTypeMap: () => {
            throw new Error('schema unreadable');
          },
        }),
        // A type of its own: no probe schema of another test is kept for it.
        returnType: new GraphQLNonNull(GraphQLString),
      });
    const context = new ExecutionContextHost([{}, args, gql, info], Refunds, Refunds.prototype[field]);
    context.setType('graphql');
    const next: CallHandler = { handle };
    try {
      return await lastValueFrom(await interceptor.intercept(context, next));
    } catch (err) {
      return err instanceof GraphqlRefusal ? { message: err.message, extensions: err.extensions } : err;
    }
  };
  return { call };
}

const request = (key?: string) => ({ method: 'POST', url: '/graphql', headers: key ? { 'idempotency-key': key } : {} });

/** Runs the plugin's willSendResponse on a response for `contextValue`. */
async function sent(contextValue: object, body: object): Promise<object> {
  const hooks = (await (idempotencyApolloPlugin() as { requestDidStart: () => Promise<object> }).requestDidStart()) as {
    willSendResponse: (r: object) => Promise<void>;
  };
  const response = { body };
  await hooks.willSendResponse({ response, contextValue });
  return response.body;
}

describe('GraphqlRunner (the interceptor on @Mutation() resolvers)', () => {
  destroyProtocolsAfterEach();
  const logs = spyOnLogger();

  it('a key from the header is read as a Structured Field String: "k-sf" and k-sf are one key', async () => {
    const { call } = setup();
    expect(await call({ orderId: 'o-8' }, { req: request('"k-sf"') })).toBe('ran');
    expect(await call({ orderId: 'o-8' }, { req: request('k-sf') }, () => of('ran again'))).toBe('ran');
    // A key from an argument is taken as it is: the quotes are part of it.
    const args = setup({}, 'withKey');
    expect(await args.call({ key: '"k-arg"' }, { req: request() })).toBe('ran');
    expect(await args.call({ key: 'k-arg' }, { req: request() }, () => of('ran again'))).toBe('ran again');
  });

  it('two mutations of one batched request under its key run side by side: only the same mutation waits for the first', async () => {
    const { call } = setup();
    const gql = { req: request('k-batch') };
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const first = call({ orderId: 'o-10' }, gql, () => from(held.then(() => 'first')), 'a1');
    // Were it to wait for the held one, it would wait for ever (the test's timeout): nothing releases it before.
    const second = await call({ text: 't' }, gql, () => of('second'), 'a2', 'note');
    release();
    expect(second).toBe('second');
    expect(await first).toBe('first');
  });

  it("an answer that cannot be completed through the schema keeps the key: the resolver's value is stored, an error logged, nothing runs again", async () => {
    const { call } = setup({}, 'refund', true);
    const gql = { req: request('k-broken') };
    expect(await call({ orderId: 'o-9' }, gql)).toBe('ran');
    expect(logs.errors).toHaveBeenCalledWith(
      expect.stringContaining('refund: the mutation ran, but its answer could not be completed'),
    );
    expect(logs.errors).toHaveBeenCalledWith(expect.stringContaining('schema unreadable'));
    expect(await call({ orderId: 'o-9' }, gql, () => of('ran again'))).toBe('ran');
  });

  it('reads the key header of Apollo on Express (req, res), on Fastify (request, reply) and of Mercurius (reply.request); marks a replay on each', async () => {
    const { call } = setup();
    const res = new FakeResponse();
    expect(await call({ orderId: 'o-1' }, { req: request('k-1'), res })).toBe('ran');
    expect(await call({ orderId: 'o-1' }, { req: request('k-1'), res }, () => of('again'))).toBe('ran');
    expect(res.getHeader('idempotent-replayed')).toBe('true');
    const reply = new FakeResponse();
    expect(await call({ orderId: 'o-2' }, { request: request('k-2'), reply })).toBe('ran');
    expect(await call({ orderId: 'o-2' }, { request: request('k-2'), reply }, () => of('again'))).toBe('ran');
    expect(reply.getHeader('idempotent-replayed')).toBe('true');
    // Mercurius: the context has the reply, the request is on it.
    const mercurius = Object.assign(new FakeResponse(), { request: request('k-9') });
    expect(await call({ orderId: 'o-9' }, { reply: mercurius })).toBe('ran');
    expect(await call({ orderId: 'o-9' }, { reply: mercurius }, () => of('again'))).toBe('ran');
    expect(mercurius.getHeader('idempotent-replayed')).toBe('true');
  });

  it('a refusal is no logged fault and carries no file path: the stack is its sentence', async () => {
    const context = new ExecutionContextHost(
      [{}, { orderId: 'o-0' }, {}, { fieldName: 'refund', path: { key: 'refund' } }],
      Refunds,
      Refunds.prototype.refund,
    );
    context.setType('graphql');
    const { interceptor } = createProtocol({ store: new InMemoryStore() });
    const refusal = await interceptor.intercept(context, { handle: () => of('ran') }).catch((err: unknown) => err);
    expect(refusal).toBeInstanceOf(IntrinsicException);
    expect(refusal).toMatchObject({ name: 'GraphQLError', stack: 'GraphQLError: idempotency-key header is required' });
  });

  it('a context without a request has no key; replayedHeader: false sets no header; the replay is noted for the plugin', async () => {
    const { call } = setup({ replayedHeader: false });
    expect(await call({ orderId: 'o-3' }, {})).toEqual({
      message: 'idempotency-key header is required',
      extensions: { code: 'IDEMPOTENCY_KEY_MISSING', status: 400, retryable: false },
    });
    const res = new FakeResponse();
    const gql = { req: request('k-3'), res };
    await call({ orderId: 'o-3' }, gql);
    await call({ orderId: 'o-3' }, gql, () => of('again'), 'alias');
    expect(res.getHeader('idempotent-replayed')).toBeUndefined();
    expect(await sent(gql, { kind: 'single', singleResult: { data: {}, extensions: { trace: 1 } } })).toEqual({
      kind: 'single',
      singleResult: { data: {}, extensions: { trace: 1, idempotency: { replayed: ['alias'] } } },
    });
  });

  it('the plugin leaves a response without replays, or an incremental one, alone', async () => {
    expect(await sent({}, { kind: 'single', singleResult: { data: {} } })).toEqual({
      kind: 'single',
      singleResult: { data: {} },
    });
    const gql = { req: request('k-4') };
    const { call } = setup();
    expect(await call({ orderId: 'o-4' }, gql)).toBe('ran');
    // A replay without a response to put the header on.
    expect(await call({ orderId: 'o-4' }, gql, () => of('again'))).toBe('ran');
    expect(await sent(gql, { kind: 'incremental' })).toEqual({ kind: 'incremental' });
  });

  it("pass-through: a mutation without a key runs as it is, the resolver's own stream returned", async () => {
    const { call } = setup({}, 'note');
    expect(await call({ text: 't' }, { req: request() }, () => of('free'))).toBe('free');
    expect(await call({ text: 't' }, { req: request() }, () => of('free again'))).toBe('free again');
  });

  it("the resolver's own errors pass untouched and free the key", async () => {
    const { call } = setup();
    const own = new Error('declined');
    const thrown = await call({ orderId: 'o-5' }, { req: request('k-5') }, () => {
      throw own;
    });
    expect(thrown).toBe(own);
    expect(await call({ orderId: 'o-5' }, { req: request('k-5') })).toBe('ran');
  });
});

describe('GraphqlContext', () => {
  const route = { id: 'Refunds.refund' } as ResolvedRouteOptions;

  it('scopes the key by the caller and the mutation, the caller given now or later', async () => {
    expect(new GraphqlContext('k', 'refund', {}, () => 'alice').scope(route)).toBe('alice%GRefunds.refund');
    expect(await new GraphqlContext('k', 'refund', {}, () => Promise.resolve('%')).scope(route)).toBe('%%GRefunds.refund');
    expect(new GraphqlContext('k', 'refund', {}, () => 'a').scope({ id: 'R:x%' } as ResolvedRouteOptions)).toBe('a%GR%3Ax%25');
  });

  it('its fingerprint is the field and its canonical arguments, pinned: a change would make every key in flight across a deploy key-reused', () => {
    const context = new GraphqlContext('k', 'refund', { b: 1, a: 'x' }, () => '%');
    expect(context.fingerprint(route)).toBe(new GraphqlContext('k', 'refund', { a: 'x', b: 1 }, () => '%').fingerprint(route));
    expect(context.fingerprint(route)).toBe('RUcoIQmb9Vh6NpUynKfwRVzgTOPgcvfr6mpsvs_rWRc');
    expect(context.sentKey()).toBe('k');
    expect(context.method).toBeUndefined();
    expect(context.matches('a', 'a')).toBe(true);
    expect(context.matches('a', 'b')).toBe(false);
    expect(() => context.check()).not.toThrow();
    expect(context.answer()).toBeUndefined();
  });
});
