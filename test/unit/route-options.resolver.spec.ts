import { beforeEach, describe, expect, it } from '@jest/globals';
import type { IdempotencyTransactions } from '../../lib/index.js';
import type { ResolvedIdempotencyOptions } from '../../lib/shared/interfaces/resolved-options.interface.js';
import { functionTag } from '../../lib/shared/utils/fingerprint-tag.util.js';
import { resolveRouteOptions } from '../../lib/shared/options/route-options.resolver.js';
import { createProtocol } from '../support/protocol.js';
import { ScriptedStore } from '../support/scripted-store.js';

describe('resolveRouteOptions', () => {
  const moduleIdentity = () => 'module';
  // Built in each test, not while jest collects them: a broken resolver must fail tests, not the file.
  let base: ResolvedIdempotencyOptions;
  beforeEach(() => {
    base = createProtocol({ ttlMs: 1000, missingHeader: 'pass-through', identity: moduleIdentity }).options;
  });

  it('inherits the module options', () => {
    expect(resolveRouteOptions('here', 'A.b', {}, base)).toEqual({
      id: 'A.b',
      ttlMs: 1000,
      missingHeader: 'pass-through',
      fingerprint: 'canonical',
      fingerprintTag: '',
      identity: moduleIdentity,
      settling: 'commit',
      waitMs: 0,
      leaseMs: 60_000,
    });
  });

  it('a message handler reads its key with keyFrom, rejects keyless messages unless missingKey says so, and has no caller scope', () => {
    const keyFrom = (data: { id: string }) => data.id;
    expect(resolveRouteOptions('here', 'A.b', {}, base, 'message')).toEqual({
      id: 'A.b',
      ttlMs: 1000,
      missingHeader: 'reject', // not the module's missingHeader: that is about HTTP headers
      fingerprint: 'canonical',
      fingerprintTag: '',
      identity: undefined,
      settling: 'commit',
      waitMs: 0,
      leaseMs: 60_000,
      message: { keyFrom: undefined, scope: undefined, ack: false, maxAttempts: 8, event: false, broadcastWaitMs: 660_000 },
    });
    expect(
      resolveRouteOptions('here', 'A.b', { keyFrom, missingKey: 'pass-through', ack: true, maxAttempts: 1 }, base, 'message'),
    ).toMatchObject({
      missingHeader: 'pass-through',
      message: { keyFrom, ack: true, maxAttempts: 1 },
    });
    expect(resolveRouteOptions('here', 'A.b', { maxAttempts: 1000 }, base, 'message').message!.maxAttempts).toBe(1000);
    for (const maxAttempts of [0, 1001, 1.5, '3']) {
      expect(() => resolveRouteOptions('here', 'A.b', { maxAttempts: maxAttempts as never }, base, 'message')).toThrow(
        'here: maxAttempts must be an integer from 1 to 1000',
      );
    }
    expect(() => resolveRouteOptions('here', 'A.b', { ack: 'yes' as never }, base, 'message')).toThrow(
      "here: ack must be true (the module acks every delivery), 'skipped' (your handler acks what it runs, the module the rest) or false, got the string 'yes'",
    );
    expect(resolveRouteOptions('here', 'A.b', { ack: 'skipped' }, base, 'message').message!.ack).toBe('skipped');
    expect(() => resolveRouteOptions('here', 'A.b', { missingKey: 'skip' as never }, base, 'message')).toThrow(
      "here: missingKey must be 'reject' or 'pass-through', got skip",
    );
    expect(() => resolveRouteOptions('here', 'A.b', { keyFrom: 'id' as never }, base, 'message')).toThrow(
      'here: keyFrom must be a function (data, context) => string, the message id',
    );
    for (const option of ['identity', 'missingHeader'] as const) {
      expect(() => resolveRouteOptions('here', 'A.b', { [option]: 'raw' }, base, 'message')).toThrow(
        `here: ${option} is an option of HTTP routes and GraphQL mutations only`,
      );
    }
    for (const kind of ['message', 'graphql'] as const) {
      expect(() => resolveRouteOptions('here', 'A.b', { fingerprint: 'raw' }, base, kind)).toThrow(
        'here: fingerprint is an option of HTTP routes only',
      );
    }
    for (const option of ['missingKey', 'ack', 'maxAttempts'] as const) {
      for (const kind of ['http', 'graphql'] as const) {
        expect(() => resolveRouteOptions('here', 'A.b', { [option]: 'reject' }, base, kind)).toThrow(
          `here: ${option} is an option of message handlers only`,
        );
      }
    }
    expect(() => resolveRouteOptions('here', 'A.b', { keyFrom: () => 'k' }, base)).toThrow(
      'here: keyFrom is an option of message handlers and GraphQL mutations only',
    );
  });

  it("a GraphQL mutation reads its key from the key header or keyFrom, with the module's identity and missingHeader", () => {
    const keyFrom = (args: { key: string }) => args.key;
    const identity = () => 'caller';
    expect(resolveRouteOptions('here', 'R.m', {}, { ...base, identity, missingHeader: 'pass-through' }, 'graphql')).toEqual({
      id: 'R.m',
      ttlMs: 1000,
      missingHeader: 'pass-through',
      fingerprint: 'canonical',
      fingerprintTag: '',
      identity,
      settling: 'commit',
      waitMs: 0,
      leaseMs: 60_000,
      graphql: { keyFrom: undefined },
    });
    expect(resolveRouteOptions('here', 'R.m', { keyFrom, missingHeader: 'reject' }, base, 'graphql')).toMatchObject({
      missingHeader: 'reject',
      graphql: { keyFrom },
    });
  });

  it('atomicPhases: an HTTP route with the port, a store with recovery points and a key; never with transactional', () => {
    const transactions: IdempotencyTransactions = { run: (work) => work({ query: () => Promise.resolve([]) }) };
    const points = { recoveryPoint: () => Promise.resolve(undefined), advanceIn: () => Promise.resolve(true) };
    const store = Object.assign(new ScriptedStore(), points, {
      finishIn: () => Promise.resolve(true),
      completeIn: () => Promise.resolve(true),
    });
    const ready = createProtocol({ store, transactions, transactionTimeoutMs: 50, leaseMs: 90 }).options;
    // The claim's lease is the module's, renewed while the handler runs: phases may call slow services.
    expect(resolveRouteOptions('here', 'A.b', { atomicPhases: true }, ready)).toMatchObject({ settling: 'phases', leaseMs: 90 });
    expect(() => resolveRouteOptions('here', 'A.b', { atomicPhases: 'yes' as never }, ready)).toThrow(
      "here: atomicPhases must be true or false, got the string 'yes'",
    );
    expect(() => resolveRouteOptions('here', 'A.b', { atomicPhases: true, transactional: true }, ready)).toThrow(
      'here: atomicPhases and transactional exclude each other',
    );
    expect(() => resolveRouteOptions('here', 'A.b', { atomicPhases: true, missingHeader: 'pass-through' }, ready)).toThrow(
      'here: atomicPhases: true needs a key on every request',
    );
    expect(() => resolveRouteOptions('here', 'A.b', { atomicPhases: true }, ready, 'message')).toThrow(
      'here: atomicPhases is an option of HTTP routes only',
    );
    expect(() => resolveRouteOptions('here', 'A.b', { atomicPhases: true }, ready, 'graphql')).toThrow(
      'here: atomicPhases is an option of HTTP routes only',
    );
    expect(() => resolveRouteOptions('here', 'A.b', { atomicPhases: true }, base)).toThrow(
      'here: atomicPhases: true needs the module option transactions',
    );
    // Each of the three methods is needed: a store with only some of them is refused.
    for (const missing of ['recoveryPoint', 'advanceIn', 'finishIn'] as const) {
      const partial = Object.assign(
        new ScriptedStore(),
        points,
        { finishIn: () => Promise.resolve(true) },
        { [missing]: undefined },
      );
      const options = createProtocol({ store: partial, transactions }).options;
      expect(() => resolveRouteOptions('here', 'A.b', { atomicPhases: true }, options)).toThrow(
        'here: atomicPhases: true needs a store that commits its record in your transaction',
      );
    }
  });

  it('a transactional route has the fixed transactionTimeoutMs lease, and needs the port and a store that completes in it', () => {
    const transactions: IdempotencyTransactions = { run: (work) => work({ query: () => Promise.resolve([]) }) };
    const store = Object.assign(new ScriptedStore(), { completeIn: () => Promise.resolve(true) });
    const ready = createProtocol({ store: store, transactions, transactionTimeoutMs: 50, leaseMs: 90 }).options;
    expect(resolveRouteOptions('here', 'A.b', { transactional: true }, ready)).toMatchObject({
      settling: 'transaction',
      leaseMs: 50,
    });
    expect(resolveRouteOptions('here', 'A.b', { transactional: false }, ready)).toMatchObject({
      settling: 'commit',
      leaseMs: 90,
    });
    expect(() => resolveRouteOptions('here', 'A.b', { transactional: 1 as never }, ready)).toThrow(
      'here: transactional must be true or false, got 1',
    );
    expect(() => resolveRouteOptions('here', 'A.b', { transactional: true }, base)).toThrow(
      'here: transactional: true needs the module option transactions',
    );
    const withoutStore = createProtocol({ transactions }).options;
    expect(() => resolveRouteOptions('here', 'A.b', { transactional: true }, withoutStore)).toThrow(
      'here: transactional: true needs a store that commits its record in your transaction',
    );
  });

  it("waitMs is 0 unless the route's inFlight, or the module's, is 'wait'; then the route's waitMs, or the module's", () => {
    const waits = createProtocol({ inFlight: 'wait', waitMs: 900 }).options;
    expect(resolveRouteOptions('here', 'A.b', {}, base).waitMs).toBe(0);
    expect(resolveRouteOptions('here', 'A.b', { waitMs: 300 }, base).waitMs).toBe(0);
    expect(resolveRouteOptions('here', 'A.b', { inFlight: 'wait' }, base).waitMs).toBe(5_000);
    expect(resolveRouteOptions('here', 'A.b', { inFlight: 'wait', waitMs: 300 }, base).waitMs).toBe(300);
    expect(resolveRouteOptions('here', 'A.b', {}, waits).waitMs).toBe(900);
    expect(resolveRouteOptions('here', 'A.b', { waitMs: 1 }, waits).waitMs).toBe(1);
    expect(resolveRouteOptions('here', 'A.b', { inFlight: 'conflict' }, waits).waitMs).toBe(0);
    expect(resolveRouteOptions('here', 'R.m', { inFlight: 'wait' }, base, 'graphql').waitMs).toBe(5_000);
    // A message's duplicate is the broker's to deliver again: the module's 'wait' does not reach it.
    expect(resolveRouteOptions('here', 'M.h', {}, waits, 'message').waitMs).toBe(0);
    expect(() => resolveRouteOptions('here', 'M.h', { inFlight: 'wait' }, base, 'message')).toThrow(
      'here: inFlight is an option of HTTP routes and GraphQL mutations only',
    );
    expect(() => resolveRouteOptions('here', 'M.h', { waitMs: 5 }, base, 'message')).toThrow(
      'here: waitMs is an option of HTTP routes and GraphQL mutations only',
    );
    expect(() => resolveRouteOptions('here', 'A.b', { inFlight: 'queue' as never }, base)).toThrow(
      "here: inFlight must be 'conflict' or 'wait', got queue",
    );
    expect(() => resolveRouteOptions('here', 'A.b', { inFlight: 'wait', waitMs: 0 }, base)).toThrow(
      'here: waitMs must be an integer from 1 to 2147483647, got 0',
    );
    expect(() => resolveRouteOptions('here', 'A.b', { waitMs: -1 }, base)).toThrow('here: waitMs must be an integer');
  });

  it('overrides them per route; identity: undefined drops the module identity', () => {
    const route = () => 'route';
    expect(
      resolveRouteOptions('here', 'A.b', { ttlMs: 7, missingHeader: 'reject', identity: route, fingerprint: 'raw' }, base),
    ).toEqual({
      id: 'A.b',
      ttlMs: 7,
      missingHeader: 'reject',
      fingerprint: 'raw',
      fingerprintTag: 'r1',
      identity: route,
      settling: 'commit',
      waitMs: 0,
      leaseMs: 60_000,
    });
    expect(resolveRouteOptions('here', 'A.b', { identity: undefined }, base).identity).toBeUndefined();
    // A function: its own tag, from its source text; the same text makes the same tag.
    const pick = (req: { body: { amount: number } }) => req.body.amount;
    const again = (req: { body: { amount: number } }) => req.body.amount;
    const picked = resolveRouteOptions('here', 'A.b', { fingerprint: pick }, base);
    expect(picked).toMatchObject({ fingerprint: pick, fingerprintTag: functionTag(pick) });
    expect(functionTag(again)).toBe(functionTag(pick));
    expect(functionTag((req: { body: { amount: number } }) => req.body)).not.toBe(functionTag(pick));
    const moduleWide = createProtocol({ fingerprint: pick }).options;
    expect(resolveRouteOptions('here', 'A.b', {}, moduleWide).fingerprintTag).toBe(functionTag(pick));
    expect(resolveRouteOptions('here', 'A.b', { fingerprint: 'canonical' }, moduleWide).fingerprintTag).toBe('');
  });

  it('names the handler in its errors', () => {
    expect(() => resolveRouteOptions('@Idempotent() on A.b()', 'A.b', { ttlMs: 0 }, base)).toThrow(
      '@Idempotent() on A.b(): ttlMs must be an integer from 1 to 31536000000, got 0',
    );
    expect(() => resolveRouteOptions('here', 'A.b', { ttlMs: 31_536_000_001 }, base)).toThrow(
      'here: ttlMs must be an integer from 1 to 31536000000, got 31536000001',
    );
    expect(() => resolveRouteOptions('here', 'A.b', null as never, base)).toThrow('here: options must be an object');
    expect(() => resolveRouteOptions('here', 'A.b', 'x' as never, base)).toThrow('here: options must be an object');
    // A slip is only suggested when the suggestion is an option of this place.
    expect(() => resolveRouteOptions('here', 'A.b', { store: 1 } as never, base)).toThrow(
      'here: unknown option "store" (did you mean scope?); valid: ttlMs, identity, missingHeader, transactional, fingerprint',
    );
    expect(() => resolveRouteOptions('here', 'A.b', { ttl: 5 } as never, base)).toThrow(
      'here: unknown option "ttl" (did you mean ttlMs?); valid: ttlMs, identity, missingHeader, transactional, fingerprint',
    );
    expect(() => resolveRouteOptions('here', 'A.b', { leaseMs: 5 } as never, base)).toThrow(
      'here: unknown option "leaseMs"; valid: ttlMs, identity, missingHeader, transactional, fingerprint',
    );
    expect(() => resolveRouteOptions('here', 'A.b', { missingHeader: 'no' as never }, base)).toThrow(
      "here: missingHeader must be 'reject' or 'pass-through', got no",
    );
    expect(() => resolveRouteOptions('here', 'A.b', { fingerprint: 'bytes' as never }, base)).toThrow(
      "here: fingerprint must be 'canonical', 'raw' or a function (req) => value, got bytes",
    );
    const raw = createProtocol({ fingerprint: 'raw' }).options;
    expect(resolveRouteOptions('here', 'A.b', {}, raw).fingerprint).toBe('raw');
    expect(resolveRouteOptions('here', 'A.b', { fingerprint: 'canonical' }, raw).fingerprint).toBe('canonical');
    expect(() => resolveRouteOptions('here', 'A.b', { identity: 1 as never }, base)).toThrow(
      'here: identity must be a function (req) => string or an injectable resolver class',
    );
  });
});
