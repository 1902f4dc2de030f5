import { describe, expect, it, jest } from '@jest/globals';
import fc from 'fast-check';
import { parseItem } from 'structured-headers';
import { type ExecutionContext, Logger } from '@nestjs/common';
import { IdempotencyException } from '../../lib/index.js';
import type { StoredResponse } from '../../lib/stores/index.js';
import type { ResolvedRouteOptions } from '../../lib/shared/interfaces/resolved-options.interface.js';
import { IdempotentReplay } from '../../lib/shared/exceptions/idempotent-replay.exception.js';
import { functionTag } from '../../lib/shared/utils/fingerprint-tag.util.js';
import { requestFingerprint } from '../../lib/shared/utils/fingerprint.util.js';
import { spyOnLogger } from '../support/logger.js';
import { createProtocol } from '../support/protocol.js';
import { activeClaim, resolvedRoute } from '../support/claims.js';
import { SEED } from '../support/arbitraries.js';
import { rejection } from '../support/rejection.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const context = { marker: 'context' } as unknown as ExecutionContext;
const route = resolvedRoute;
const request = (key?: string | string[], over: Record<string, unknown> = {}) => ({
  method: 'POST',
  url: '/pay?b=2&a=1',
  headers: key === undefined ? {} : { 'idempotency-key': key },
  body: { amount: 1 },
  ...over,
});
const response: StoredResponse = { status: 201, headers: { 'content-type': 'text/plain' }, body: Buffer.from('ok') };

const setup = createProtocol;

async function httpError(promise: Promise<unknown>) {
  const err = await rejection(promise);
  expect(err).toBeInstanceOf(IdempotencyException);
  const e = err as IdempotencyException;
  return { status: e.getStatus(), reason: e.reason, headers: e.headers, code: e.code };
}

describe('IdempotencyService.begin: raw-body fingerprints', () => {
  const log = spyOnLogger();
  const raw = Buffer.from('{ "amount": 1 }');

  it("fingerprints the bytes as received on a 'raw' route, the parsed body on a canonical one", async () => {
    const { begin } = setup();
    const withBytes = request('k', { rawBody: raw });
    const rawClaim = (await begin(withBytes, context, route({ fingerprint: 'raw' })))!;
    expect(rawClaim.fingerprint).toBe(`r1:${requestFingerprint('POST', '/pay?b=2&a=1', raw, 'Pay.create')}`);
    const canonical = (await begin(request('k2', { rawBody: raw }), context, route()))!;
    expect(canonical.fingerprint).toBe(requestFingerprint('POST', '/pay?b=2&a=1', { amount: 1 }, 'Pay.create'));
    expect(log.warnings).not.toHaveBeenCalled();
  });

  it('falls back to the parsed body without the bytes, and says once, for the whole module, how to keep them', async () => {
    const { begin } = setup();
    const first = (await begin(request('k1'), context, route({ fingerprint: 'raw' })))!;
    expect(first.fingerprint).toBe(requestFingerprint('POST', '/pay?b=2&a=1', { amount: 1 }, 'Pay.create'));
    await begin(request('k2'), context, route({ fingerprint: 'raw', id: 'Other.create' }));
    expect(log.warnings).toHaveBeenCalledTimes(1);
    expect(log.warnings.mock.calls[0][0]).toBe(
      "Pay.create: fingerprint 'raw' needs the request's bytes, but it has none (req.rawBody); fingerprinting the parsed body instead. Create the application with rawBody: true, e.g. NestFactory.create(AppModule, { rawBody: true }). Logged once",
    );
  });

  it('needs no bytes, and warns of nothing, for a request without a body', async () => {
    const { begin } = setup();
    for (const body of [undefined, null]) {
      const claim = (await begin(request(`k-${String(body)}`, { body }), context, route({ fingerprint: 'raw' })))!;
      expect(claim.fingerprint).toBe(requestFingerprint('POST', '/pay?b=2&a=1', undefined, 'Pay.create'));
    }
    expect(log.warnings).not.toHaveBeenCalled();
    await begin(request('k-body'), context, route({ fingerprint: 'raw' }));
    expect(log.warnings).toHaveBeenCalledTimes(1);
  });
});

describe('IdempotencyService.begin: the key', () => {
  spyOnLogger();
  it('claims with the key, an owner token, the fingerprint, the lease and the route ttl', async () => {
    const { store, begin } = setup();
    const claim = (await begin(request('k-1'), context, route({ ttlMs: 77, leaseMs: 900 })))!;
    const fingerprint = requestFingerprint('POST', '/pay?b=2&a=1', { amount: 1 }, 'Pay.create');
    expect(claim).toEqual({
      key: 'k-1',
      storeKey: 'idem:%:k-1',
      owner: expect.stringMatching(UUID),
      fingerprint,
      ttlMs: 77,
      route: 'Pay.create',
      leaseMs: 900,
      claimedAt: expect.any(Number),
      method: 'POST',
      storeMs: 0,
    });
    expect(Math.abs(claim.claimedAt - Date.now())).toBeLessThan(1000);
    expect(store.calls).toEqual([['claim', 'idem:%:k-1', { owner: claim.owner, fingerprint, leaseMs: 900 }]]);
    const again = (await begin(request('k-2'), context, route()))!;
    expect(again.owner).not.toBe(claim.owner);
  });

  it('fingerprints originalUrl (Express sub-apps) before url', async () => {
    const { begin } = setup();
    const claim = (await begin(request('k', { originalUrl: '/api/pay?a=1' }), context, route()))!;
    expect(claim.fingerprint).toBe(requestFingerprint('POST', '/api/pay?a=1', { amount: 1 }, 'Pay.create'));
  });

  it('reads the configured header name and the prefix', async () => {
    const { store, begin } = setup({ headerName: 'X-Key', keyPrefix: 'pay:' });
    await begin(request(undefined, { headers: { 'x-key': 'abc' } }), context, route());
    expect(store.calls[0][1]).toBe('pay:%:abc');
    expect(await httpError(begin(request('abc'), context, route()))).toEqual({
      status: 400,
      reason: 'x-key header is required',
      code: 'key-missing',
      headers: {},
    });
  });

  it('refuses a repeated header: joined the way Node joins it, the key has a space', async () => {
    const { store, begin } = setup();
    expect(await httpError(begin(request(['a', 'b']), context, route()))).toEqual({
      status: 400,
      reason: 'idempotency-key has a control character, a space or an invisible character at index 2',
      code: 'key-invalid',
      headers: {},
    });
    expect(store.calls).toEqual([]);
  });

  it('refuses a missing or blank key with 400, or passes it through when the route says so', async () => {
    const { store, begin } = setup();
    for (const key of [undefined, '', ' ', '\t ']) {
      expect(await httpError(begin(request(key), context, route()))).toEqual({
        status: 400,
        reason: 'idempotency-key header is required',
        code: 'key-missing',
        headers: {},
      });
      expect(await begin(request(key), context, route({ missingHeader: 'pass-through' }))).toBeUndefined();
    }
    expect(store.calls).toEqual([]);
  });

  it('refuses a key longer than maxKeyLength before reading it, and accepts one of exactly that length', async () => {
    const { store, begin } = setup({ maxKeyLength: 5 });
    expect(await httpError(begin(request('abcdef'), context, route()))).toEqual({
      status: 400,
      reason: 'idempotency-key exceeds 5 characters',
      code: 'key-invalid',
      headers: {},
    });
    expect(await httpError(begin(request('      '), context, route({ missingHeader: 'pass-through' })))).toMatchObject({
      reason: 'idempotency-key exceeds 5 characters',
      code: 'key-invalid',
    });
    expect((await begin(request('abcde'), context, route()))!.key).toBe('abcde');
    expect(store.calls).toHaveLength(1);
  });

  it('refuses control characters and spaces, naming the index only', async () => {
    const { store, begin } = setup();
    expect(await httpError(begin(request('ab c'), context, route()))).toEqual({
      status: 400,
      reason: 'idempotency-key has a control character, a space or an invisible character at index 2',
      code: 'key-invalid',
      headers: {},
    });
    expect(store.calls).toEqual([]);
  });
});

describe('IdempotencyService.begin: a key sent as a Structured Field String', () => {
  spyOnLogger();

  it('is the same key as the bare one: unquoted and unescaped before it reaches the store', async () => {
    const { store, begin } = setup();
    const quoted = (await begin(request('"k-1"'), context, route()))!;
    const bare = (await begin(request('k-1'), context, route()))!;
    expect(quoted.key).toBe('k-1');
    expect(quoted.storeKey).toBe(bare.storeKey);
    const escaped = (await begin(request('"a\\"b"'), context, route()))!;
    expect(escaped.storeKey).toBe('idem:%:a"b');
    expect(store.calls.map((c) => c[1])).toEqual(['idem:%:k-1', 'idem:%:k-1', 'idem:%:a"b']);
  });

  it('answers 400 for a malformed one, naming the header only', async () => {
    const { store, begin } = setup();
    for (const bad of ['"secret-key', '"secret";a=1', '"se\\cret"']) {
      expect(await httpError(begin(request(bad), context, route({ missingHeader: 'pass-through' })))).toEqual({
        status: 400,
        reason:
          'idempotency-key starts with a quote but is not a valid Structured Field String (RFC 9651): unterminated, a bad escape, or something after the closing quote',
        code: 'key-invalid',
        headers: {},
      });
    }
    expect(store.calls).toEqual([]);
  });

  it('applies the key rules to the decoded key: blank is missing, a space is refused, the length is its own', async () => {
    const { store, begin } = setup({ maxKeyLength: 5 });
    expect(await httpError(begin(request('""'), context, route()))).toMatchObject({
      reason: 'idempotency-key header is required',
      code: 'key-missing',
    });
    expect(await begin(request('"  "'), context, route({ missingHeader: 'pass-through' }))).toBeUndefined();
    expect(await httpError(begin(request('"a b"'), context, route()))).toMatchObject({
      reason: 'idempotency-key has a control character, a space or an invisible character at index 1',
      code: 'key-invalid',
    });
    // Five characters, each escaped: 12 sent, the most a five-character key can take.
    const longest = `"${'\\"'.repeat(5)}"`;
    expect(longest).toHaveLength(12);
    expect((await begin(request(longest), context, route()))!.key).toBe('"'.repeat(5));
    expect(await httpError(begin(request(`"${'\\"'.repeat(5)}a"`), context, route()))).toMatchObject({
      reason: 'idempotency-key exceeds 5 characters',
      code: 'key-invalid',
    });
    expect(await httpError(begin(request('"abcdef"'), context, route()))).toMatchObject({
      reason: 'idempotency-key exceeds 5 characters',
      code: 'key-invalid',
    });
    // Unquoted, the limit applies to what was sent, before anything else is read.
    expect(await httpError(begin(request('abcdef'), context, route()))).toMatchObject({
      reason: 'idempotency-key exceeds 5 characters',
      code: 'key-invalid',
    });
    expect(store.calls).toHaveLength(1);
  });

  it('property: any header value gets a claim, a pass-through or a 400, never another error', async () => {
    const { begin } = setup({ maxKeyLength: 20 });
    const char = fc.oneof(
      fc.constantFrom('"', '\\', ';', '=', ' ', '\t', 'a', '-', '\u0000', '\u007f', 'é'),
      fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(char, { maxLength: 30 }), fc.boolean(), async (chars, quoted) => {
        const value = `${quoted ? '"' : ''}${chars.join('')}`;
        let outcome: unknown;
        try {
          outcome = await begin(request(value), context, route({ missingHeader: 'pass-through' }));
        } catch (err) {
          outcome = err;
        }
        if (outcome instanceof Error) {
          expect(outcome).toBeInstanceOf(IdempotencyException);
          expect((outcome as IdempotencyException).getStatus()).toBe(400);
        } else if (outcome) {
          expect((outcome as { key: string }).key).toBe(value.startsWith('"') ? parseItem(value)[0] : value);
        }
      }),
      { seed: SEED, numRuns: 500 },
    );
  });
});

describe('IdempotencyService.begin: the identity scope', () => {
  const log = spyOnLogger();
  it('passes request and context to the identity function and escapes its scope into the key', async () => {
    const identity = jest.fn((_req: unknown, _ctx: ExecutionContext) => 'acct:1%');
    const { store, begin } = setup();
    const req = request('k');
    await begin(req, context, route({ identity }));
    expect(identity).toHaveBeenCalledWith(req, context);
    expect(store.calls[0][1]).toBe('idem:acct%3A1%25:k');
  });

  it('awaits an async identity', async () => {
    const { store, begin } = setup();
    await begin(request('k'), context, route({ identity: async () => 'bob' }));
    expect(store.calls[0][1]).toBe('idem:bob:k');
  });

  it('answers 500 for a resolver that returns no scope (not a string, or empty), naming the route in the log', async () => {
    const { store, begin } = setup();
    for (const [bad, what] of [
      [42, 'number'],
      [undefined, 'undefined'],
      ['', 'an empty string'],
    ] as const) {
      expect(await httpError(begin(request('k'), context, route({ identity: () => bad as never })))).toEqual({
        status: 500,
        reason: 'the caller scope of this request could not be resolved',
        code: 'scope-unresolved',
        headers: {},
      });
      expect(log.errors).toHaveBeenLastCalledWith(
        `Pay.create: the identity resolver returned ${what}, not a scope; answering 500`,
      );
    }
    expect(store.calls).toEqual([]);
  });

  it('refuses a scope that is too long once escaped, or has control characters', async () => {
    const { store, begin } = setup({ maxScopeLength: 6 });
    expect(await httpError(begin(request('k'), context, route({ identity: () => 'a:b:' })))).toEqual({
      status: 400,
      reason: 'identity scope exceeds 6 characters',
      code: 'scope-invalid',
      headers: {},
    });
    expect(await httpError(begin(request('k'), context, route({ identity: () => 'a b' })))).toEqual({
      status: 400,
      reason: 'identity scope has a control character, a space or an invisible character at index 1',
      code: 'scope-invalid',
      headers: {},
    });
    expect(store.calls).toEqual([]);
    await begin(request('k'), context, route({ identity: () => 'a:bc' }));
    expect(store.calls[0][1]).toBe('idem:a%3Abc:k');
  });

  it('builds a resolver class once, from the container, or creates it when it is not a provider', async () => {
    class Resolver {
      constructor(readonly name: string) {}
      resolve(req: { headers: Record<string, string> }) {
        return `${this.name}-${req.headers['idempotency-key']}`;
      }
    }
    const get = jest.fn((_type: unknown, _options: unknown) => new Resolver('got'));
    const { store, begin, identities } = setup({}, { get: get as never });
    await identities.prepare(Resolver, 'test');
    await begin(request('k1'), context, route({ identity: Resolver }));
    await begin(request('k2'), context, route({ identity: Resolver }));
    expect(get).toHaveBeenCalledTimes(1);
    expect(get).toHaveBeenCalledWith(Resolver, { strict: false });
    expect(store.calls.map((c) => c[1])).toEqual(['idem:got-k1:k1', 'idem:got-k2:k2']);

    const create = jest.fn(async (_type: unknown) => new Resolver('made'));
    const other = setup(
      {},
      {
        get: () => {
          throw new Error('not a provider');
        },
        create: create as never,
      },
    );
    await other.begin(request('k'), context, route({ identity: Resolver }));
    expect(create).toHaveBeenCalledWith(Resolver);
    expect(other.store.calls[0][1]).toBe('idem:made-k:k');
  });

  it('prepareIdentity leaves functions and no identity alone', async () => {
    const get = jest.fn();
    const { identities } = setup({}, { get: get as never });
    await identities.prepare(undefined, 'test');
    await identities.prepare(() => 'x', 'test');
    expect(get).not.toHaveBeenCalled();
  });
});

describe('IdempotencyService.begin: the body and the store', () => {
  const log = spyOnLogger();
  it('answers 400 to a body nested too deeply and rethrows other serialisation errors', async () => {
    const { store, begin } = setup();
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(await httpError(begin(request('k', { body: deep }), context, route()))).toEqual({
      status: 400,
      reason: 'request body is nested too deeply',
      code: 'body-too-deep',
      headers: {},
    });
    const boom = new TypeError('boom');
    const body = {
      toJSON() {
        throw boom;
      },
    };
    expect(await rejection(begin(request('k', { body }), context, route()))).toBe(boom);
    expect(store.calls).toEqual([]);
  });

  it('fails closed with 503 and Retry-After when the store cannot be reached', async () => {
    const { store, begin } = setup();
    store.claimAnswer = () => Promise.reject(new Error('ECONNREFUSED'));
    expect(await httpError(begin(request('k'), context, route()))).toEqual({
      status: 503,
      reason: 'idempotency store unavailable; retry shortly',
      code: 'store-unavailable',
      headers: { 'retry-after': '1' },
    });
    expect(log.errors).toHaveBeenCalledWith('Pay.create: claim failed, answering 503: ECONNREFUSED');
  });

  it('releases a claim whose outcome is unknown as soon as the store answers, retrying until the lease would be over', async () => {
    jest.useFakeTimers({ now: 0 });
    const { store, begin } = setup();
    store.claimAnswer = () => Promise.reject(new Error('timed out'));
    let failures = 2;
    store.releaseAnswer = () => (failures-- > 0 ? Promise.reject(new Error('down')) : Promise.resolve(false));
    expect((await httpError(begin(request('k'), context, route({ leaseMs: 1000 })))).status).toBe(503);
    const releases = () => store.calls.filter((c) => c[0] === 'release');
    const owner = (store.calls[0][2] as { owner: string }).owner;
    expect(releases()).toEqual([['release', 'idem:%:k', owner]]);
    await jest.advanceTimersByTimeAsync(99);
    expect(releases()).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(releases()).toHaveLength(2);
    await jest.advanceTimersByTimeAsync(200);
    expect(releases()).toHaveLength(3); // answered (false: the claim never landed): done
    await jest.advanceTimersByTimeAsync(10_000);
    expect(releases()).toHaveLength(3);
    expect(jest.getTimerCount()).toBe(0);

    store.calls.length = 0;
    store.releaseAnswer = () => Promise.reject(new Error('down'));
    await rejection(begin(request('k2'), context, route({ leaseMs: 1000 })));
    await jest.advanceTimersByTimeAsync(10_000);
    // At 0, 100, 300 and 700 ms; the next pause would end past the lease.
    expect(releases()).toHaveLength(4);

    // A last attempt that ends exactly with the lease is still made.
    const edge = setup();
    edge.store.claimAnswer = () => Promise.reject(new Error('timed out'));
    edge.store.releaseAnswer = () => Promise.reject(new Error('down'));
    await rejection(edge.begin(request('k3'), context, route({ leaseMs: 700 })));
    await jest.advanceTimersByTimeAsync(10_000);
    expect(edge.store.calls.filter((c) => c[0] === 'release')).toHaveLength(4);
  });

  it('answers 415 for a body that nothing read, on either adapter; a read or empty body is fine', async () => {
    const { store, begin } = setup();
    const unread = [
      { headers: { 'content-length': '5' }, readableEnded: false },
      { headers: { 'transfer-encoding': 'chunked' }, readableEnded: false },
      { headers: { 'content-length': '5' }, raw: { readableEnded: false } },
    ];
    for (const over of unread) {
      const req = request('k', over);
      req.headers = { ...req.headers, 'idempotency-key': 'k' };
      expect(await httpError(begin(req, context, route()))).toEqual({
        status: 415,
        reason:
          "request body is read by no body parser, so it cannot be checked against the key; register a parser for its media type (e.g. app.useBodyParser('text'))",
        code: 'body-unread',
        headers: {},
      });
    }
    expect(store.calls).toEqual([]);
    const fine = [
      { headers: { 'content-length': '5' }, readableEnded: true },
      { headers: { 'content-length': '5' }, raw: { readableEnded: true }, readableEnded: false },
      { headers: { 'content-length': '0' }, readableEnded: false },
      { headers: {}, readableEnded: false },
      { headers: { 'content-length': '5' } },
    ];
    for (const over of fine) {
      const req = request('k', over);
      req.headers = { ...req.headers, 'idempotency-key': 'k' };
      await begin(req, context, route());
    }
    expect(store.calls).toHaveLength(fine.length);
  });

  it('answers a key in flight with 409 for the same request and 422 for another', async () => {
    const { store, begin } = setup();
    const fingerprint = requestFingerprint('POST', '/pay?b=2&a=1', { amount: 1 }, 'Pay.create');
    store.claimAnswer = async () => ({ state: 'in-flight', fingerprint });
    expect(await httpError(begin(request('k'), context, route()))).toEqual({
      status: 409,
      reason: 'idempotency-key in-flight; retry shortly',
      code: 'key-in-flight',
      headers: { 'retry-after': '1' },
    });
    store.claimAnswer = async () => ({ state: 'in-flight', fingerprint: 'other' });
    expect(await httpError(begin(request('k'), context, route()))).toEqual({
      status: 422,
      reason: 'idempotency-key was already used for a different request',
      code: 'key-reused',
      headers: {},
    });
  });

  it('replays a completed key for the same request and answers 422 for another', async () => {
    const { store, begin } = setup();
    const fingerprint = requestFingerprint('POST', '/pay?b=2&a=1', { amount: 1 }, 'Pay.create');
    store.claimAnswer = async () => ({ state: 'completed', record: { fingerprint, response } });
    const replay = await rejection(begin(request('k'), context, route()));
    expect(replay).toBeInstanceOf(IdempotentReplay);
    expect((replay as IdempotentReplay).response).toBe(response);
    store.claimAnswer = async () => ({ state: 'completed', record: { fingerprint: 'other', response } });
    expect(await httpError(begin(request('k'), context, route()))).toEqual({
      status: 422,
      reason: 'idempotency-key was already used for a different request',
      code: 'key-reused',
      headers: {},
    });
  });
});

describe('IdempotencyService.begin: fingerprint functions', () => {
  spyOnLogger();

  it('fingerprints what the function returns instead of the body, under its tag, with handler, method and target', async () => {
    const { store, begin } = setup();
    const seen: unknown[] = [];
    const pick = (req: { body: { amount: number } }, ctx: unknown) => {
      seen.push(req, ctx);
      return { amount: req.body.amount };
    };
    const withStamp = request('k', { body: { amount: 1, at: 'noon' } });
    const claim = (await begin(withStamp, context, route({ fingerprint: pick })))!;
    expect(seen).toEqual([withStamp, context]);
    const hash = requestFingerprint('POST', '/pay?b=2&a=1', { amount: 1 }, 'Pay.create');
    expect(claim.fingerprint).toBe(`${functionTag(pick)}:${hash}`);
    expect(functionTag(pick)).toMatch(/^f1-[\w-]{8}$/);
    expect(store.calls[0][2]).toMatchObject({ fingerprint: claim.fingerprint });
    const later = (await begin(request('k2', { body: { amount: 1, at: 'one' } }), context, route({ fingerprint: pick })))!;
    expect(later.fingerprint).toBe(claim.fingerprint);
  });

  it('takes undefined and null from a function as no body', async () => {
    const { begin } = setup();
    const none = requestFingerprint('POST', '/pay?b=2&a=1', undefined, 'Pay.create');
    for (const value of [undefined, null]) {
      const pick = () => value;
      const claim = (await begin(request(`k-${String(value)}`), context, route({ fingerprint: pick })))!;
      expect(claim.fingerprint).toBe(`${functionTag(pick)}:${none}`);
    }
  });

  it('awaits a function that returns a promise or another thenable', async () => {
    const { begin } = setup();
    const asPromise = async () => ['a', 1];
    const thenable = () => ({ then: (resolve: (v: unknown) => void) => resolve(['a', 1]) });
    const hash = requestFingerprint('POST', '/pay?b=2&a=1', ['a', 1], 'Pay.create');
    expect((await begin(request('k1'), context, route({ fingerprint: asPromise })))!.fingerprint).toBe(
      `${functionTag(asPromise)}:${hash}`,
    );
    expect((await begin(request('k2'), context, route({ fingerprint: thenable })))!.fingerprint).toBe(
      `${functionTag(thenable)}:${hash}`,
    );
  });

  it('lets what the function throws go to the filters as it is, before anything is claimed', async () => {
    const { store, begin } = setup();
    const thrown = new Error('amount is required');
    const sync = () => {
      throw thrown;
    };
    const async = () => Promise.reject(thrown);
    expect(await rejection(begin(request('k'), context, route({ fingerprint: sync })))).toBe(thrown);
    expect(await rejection(begin(request('k'), context, route({ fingerprint: async })))).toBe(thrown);
    expect(store.calls).toEqual([]);
  });

  it('answers 400 for a value nested too deeply, as for a body', async () => {
    const { begin } = setup();
    let deep: unknown = 1;
    for (let i = 0; i < 20_000; i++) deep = [deep];
    const err = await httpError(begin(request('k'), context, route({ fingerprint: async () => deep })));
    expect(err).toMatchObject({ status: 400, code: 'body-too-deep' });
  });
});

describe('IdempotencyService.begin: a fingerprint stored under another setting', () => {
  const log = spyOnLogger();
  const canonical = requestFingerprint('POST', '/pay?b=2&a=1', { amount: 1 }, 'Pay.create');
  const bytes = Buffer.from('{"amount":1}');
  const raw = `r1:${requestFingerprint('POST', '/pay?b=2&a=1', bytes, 'Pay.create')}`;
  const pick = (req: { body: unknown }) => req.body;
  const picked = `${functionTag(pick)}:${canonical}`;
  const other = requestFingerprint('POST', '/pay?b=2&a=1', { amount: 2 }, 'Pay.create');

  const outcome = async (
    stored: string,
    state: 'completed' | 'in-flight',
    over: Partial<ResolvedRouteOptions>,
    rawBody?: Buffer,
  ) => {
    const { store, begin } = setup();
    store.claimAnswer = async () =>
      state === 'completed' ? { state, record: { fingerprint: stored, response } } : { state, fingerprint: stored };
    const err = await rejection(begin(request('k', { rawBody }), context, route(over)));
    if (err instanceof IdempotentReplay) return 'replay';
    return (err as IdempotencyException).getStatus();
  };

  it.each(['completed', 'in-flight'] as const)(
    'recomputes with a built-in setting: the same request is a %s key, another a 422',
    async (state) => {
      const same = state === 'completed' ? 'replay' : 409;
      // Stored canonical (or before tags existed), now raw or a function.
      expect(await outcome(canonical, state, { fingerprint: 'raw' }, bytes)).toBe(same);
      expect(await outcome(canonical, state, { fingerprint: pick })).toBe(same);
      expect(await outcome(other, state, { fingerprint: 'raw' }, bytes)).toBe(422);
      expect(await outcome(other, state, { fingerprint: pick })).toBe(422);
      // Stored raw, now canonical or a function, with the bytes at hand.
      expect(await outcome(raw, state, {}, bytes)).toBe(same);
      expect(await outcome(raw, state, { fingerprint: pick }, bytes)).toBe(same);
      expect(await outcome(raw, state, {}, Buffer.from('{"amount":2}'))).toBe(422);
      // Stored by the same setting: compared as it is.
      expect(await outcome(`r1:${other}`, state, { fingerprint: 'raw' }, bytes)).toBe(422);
      expect(await outcome(`${functionTag(pick)}:${other}`, state, { fingerprint: pick })).toBe(422);
      expect(log.warnings).not.toHaveBeenCalled();
    },
  );

  it.each(['completed', 'in-flight'] as const)(
    'takes a %s key it cannot recompute as the same request, with a warning naming the route and the tag',
    async (state) => {
      const same = state === 'completed' ? 'replay' : 409;
      expect(await outcome(picked, state, {})).toBe(same);
      expect(await outcome(`${functionTag(pick)}:${other}`, state, { fingerprint: 'raw' }, bytes)).toBe(same);
      // Raw without the bytes (the application dropped rawBody: true), and a tag from a newer version.
      expect(await outcome(raw, state, {})).toBe(same);
      expect(await outcome(`c9:${other}`, state, {})).toBe(same);
      expect(log.warnings).toHaveBeenCalledTimes(4);
      expect(log.warnings.mock.calls[0][0]).toBe(
        `Pay.create: the key's stored fingerprint was made by another fingerprint setting ("${functionTag(pick)}"), which cannot be recomputed here; taking the request as the same one (a replay or 409, never a second run)`,
      );
      expect(log.warnings.mock.calls[2][0]).toContain('("r1")');
      expect(log.warnings.mock.calls[3][0]).toContain('("c9")');
      // A tag is quoted and cut: whatever a store holds, a log line stays short.
      expect(await outcome(`${'x'.repeat(60)}:${other}`, state, {})).toBe(same);
      expect(log.warnings.mock.calls[4][0]).toContain(`("${'x'.repeat(40)}")`);
    },
  );

  it('does not take a body too deep to fingerprint now as one fingerprinted canonically before', async () => {
    let deep: unknown = 1;
    for (let i = 0; i < 20_000; i++) deep = [deep];
    const { store, begin } = setup();
    store.claimAnswer = async () => ({ state: 'completed', record: { fingerprint: canonical, response } });
    const err = await httpError(begin(request('k', { body: deep, rawBody: bytes }), context, route({ fingerprint: 'raw' })));
    expect(err).toMatchObject({ status: 422, code: 'key-reused' });
  });
});

describe('IdempotencyService: commit and release', () => {
  const log = spyOnLogger();
  const claim = activeClaim();

  it('commits the response for the route ttl, and only logs when that fails', async () => {
    const { store, service } = setup();
    await service.commit(claim, response);
    expect(store.calls).toEqual([['commit', 'idem:%:k', 'me', { fingerprint: 'fp', response }, 500]]);
    expect(log.warnings).not.toHaveBeenCalled();
    store.commitAnswer = async () => false;
    await service.commit(claim, response);
    expect(log.warnings).toHaveBeenCalledWith(
      'Pay.create: response not stored: the claim had expired and the key was taken over',
    );
    expect((log.warnings.mock.contexts[0] as { context?: string }).context).toBe('Idempotency');
  });

  it('tries a failed commit again in the background, with a doubling pause, until it lands', async () => {
    jest.useFakeTimers({ now: 0 });
    const { store, service } = setup();
    const held = activeClaim({ claimedAt: 0, leaseMs: 10_000 });
    let failures = 3;
    store.commitAnswer = () => (failures-- > 0 ? Promise.reject(new Error('down')) : Promise.resolve(true));
    let settled = false;
    await expect(service.commit(held, response, () => (settled = true))).resolves.toBeUndefined();
    expect(held.settling).toBe(true);
    expect(store.calls).toHaveLength(1);
    expect(settled).toBe(false);
    expect(log.warnings).toHaveBeenCalledWith('Pay.create: commit failed, retrying for a lease: down');
    await jest.advanceTimersByTimeAsync(99);
    expect(store.calls).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(store.calls).toHaveLength(2);
    await jest.advanceTimersByTimeAsync(200);
    expect(store.calls).toHaveLength(3);
    await jest.advanceTimersByTimeAsync(400);
    expect(store.calls).toHaveLength(4);
    expect(settled).toBe(true);
    expect(log.errors).not.toHaveBeenCalled();
  });

  it('says when a retried commit landed, and when it found the key taken over instead', async () => {
    jest.useFakeTimers({ now: 0 });
    const logs = jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
    const { store, service } = setup();
    let answers = [Promise.reject(new Error('down')), Promise.resolve(true)];
    answers[0].catch(() => undefined);
    store.commitAnswer = () => answers.shift()!;
    await service.commit(activeClaim({ claimedAt: 0, leaseMs: 10_000 }), response);
    await jest.advanceTimersByTimeAsync(100);
    expect(logs.mock.calls).toEqual([['Pay.create: response stored after the commit was retried']]);
    expect(log.warnings).not.toHaveBeenCalledWith(
      'Pay.create: response not stored: the claim had expired and the key was taken over',
    );
    logs.mockClear();
    answers = [Promise.reject(new Error('down')), Promise.resolve(false)];
    answers[0].catch(() => undefined);
    await service.commit(activeClaim({ claimedAt: 0, leaseMs: 10_000 }), response);
    await jest.advanceTimersByTimeAsync(100);
    expect(logs).not.toHaveBeenCalled();
    expect(log.warnings).toHaveBeenCalledWith(
      'Pay.create: response not stored: the claim had expired and the key was taken over',
    );
  });

  it('gives a failed commit up after one lease, or once a renewal found the claim taken', async () => {
    jest.useFakeTimers({ now: 0 });
    const { store, service } = setup();
    store.commitAnswer = () => Promise.reject(new Error('down'));
    const held = activeClaim({ claimedAt: 0, leaseMs: 1_000 });
    let settled = false;
    await service.commit(held, response, () => (settled = true));
    await jest.advanceTimersByTimeAsync(800);
    expect(store.calls).toHaveLength(4);
    expect(settled).toBe(true);
    expect(log.errors).toHaveBeenCalledWith(
      'Pay.create: response not stored: the store did not answer for a lease; the claim expires',
    );
    store.calls.length = 0;
    const lost = activeClaim({ claimedAt: 1_000, leaseMs: 60_000 });
    await service.commit(lost, response);
    lost.lost = true;
    await jest.advanceTimersByTimeAsync(1_000);
    expect(store.calls).toHaveLength(1);
  });

  it('gives up after one lease even while the renewer keeps the claim held: a store refusing the value must not hold the key', async () => {
    jest.useFakeTimers({ now: 0 });
    const { store, service } = setup();
    store.commitAnswer = () => Promise.reject(new Error('value too large'));
    const renewed = activeClaim({ claimedAt: 0, leaseMs: 1_000 });
    let settled = false;
    await service.commit(renewed, response, () => (settled = true));
    await jest.advanceTimersByTimeAsync(1_000);
    expect(settled).toBe(true);
  });

  it("counts a commit's time, failed or not, in the event's store time", async () => {
    const { store, service, observer } = setup({ events: () => undefined });
    await observer.onModuleInit();
    const slow = activeClaim({ storeMs: 5 });
    store.commitAnswer = () => new Promise((r) => setTimeout(() => r(true), 30));
    await service.commit(slow, response);
    expect(slow.storeMs).toBeGreaterThanOrEqual(5 + 25);
    const failing = activeClaim({ storeMs: 5, leaseMs: 10 });
    store.commitAnswer = () => new Promise((_, reject) => setTimeout(() => reject(new Error('down')), 30));
    await service.commit(failing, response);
    expect(failing.storeMs).toBeGreaterThanOrEqual(5 + 25);
  });

  it('keeps a response-too-large record instead of a body over maxResponseBytes, with the status it had', async () => {
    const { store, service } = setup({ maxResponseBytes: 4 });
    await service.commit(claim, { status: 201, headers: { 'content-type': 'text/plain' }, body: Buffer.from('12345') });
    const record = store.calls[0][3] as { response: { status: number; headers: object; body: Buffer } };
    expect(record.response.status).toBe(201);
    expect(record.response.headers).toEqual({ 'content-type': 'application/json; charset=utf-8' });
    expect(JSON.parse(record.response.body.toString())).toEqual({
      error:
        'the request with this key was processed, but its response was over 4 bytes and was not kept, so it cannot be sent again',
    });
    expect(log.warnings).toHaveBeenCalledWith(
      'Pay.create: response of 5 bytes is over maxResponseBytes (4): the key keeps a response-too-large record instead',
    );
    store.calls.length = 0;
    await service.commit(claim, { status: 201, headers: {}, body: Buffer.from('1234') });
    expect((store.calls[0][3] as { response: { body: Buffer } }).response.body.toString()).toBe('1234');
  });

  it("releases the caller's claim, and only logs when that fails", async () => {
    const { store, service } = setup();
    await service.release(claim);
    expect(store.calls).toEqual([['release', 'idem:%:k', 'me']]);
    expect(log.errors).not.toHaveBeenCalled();
    store.releaseAnswer = () => Promise.reject(new Error('down'));
    await expect(service.release(claim)).resolves.toBeUndefined();
    expect(log.errors).toHaveBeenCalledWith('Pay.create: claim not released, it expires with its lease: down');
  });
});
