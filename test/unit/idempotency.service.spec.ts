import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { type ExecutionContext, Logger } from '@nestjs/common';
import type { ModuleRef } from '@nestjs/core';
import { IdempotencyException, type IdempotencyModuleOptions, type StoredResponse } from '../../lib/index.js';
import { IdempotencyService, type ActiveClaim } from '../../lib/idempotency.service.js';
import { IDEMPOTENT_ROUTE_METADATA } from '../../lib/idempotency.constants.js';
import { IdempotentReplay } from '../../lib/idempotent-replay.exception.js';
import { requestFingerprint } from '../../lib/utils/fingerprint.util.js';
import { resolveModuleOptions, type ResolvedRouteOptions } from '../../lib/utils/options.util.js';
import { ScriptedStore } from '../support/scripted-store.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const context = { marker: 'context' } as unknown as ExecutionContext;
const route = (over: Partial<ResolvedRouteOptions> = {}): ResolvedRouteOptions => ({
  id: 'Pay.create',
  ttlMs: 1000,
  missingHeader: 'reject',
  identity: undefined,
  ...over,
});
const request = (key?: string | string[], over: Record<string, unknown> = {}) => ({
  method: 'POST',
  url: '/pay?b=2&a=1',
  headers: key === undefined ? {} : { 'idempotency-key': key },
  body: { amount: 1 },
  ...over,
});
const response: StoredResponse = { status: 201, headers: { 'content-type': 'text/plain' }, body: Buffer.from('ok') };

function setup(options: IdempotencyModuleOptions = {}, moduleRef: Partial<ModuleRef> = {}) {
  const store = new ScriptedStore();
  const service = new IdempotencyService(resolveModuleOptions({ cache: store, ...options }), moduleRef as ModuleRef);
  return { store, service };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

async function httpError(promise: Promise<unknown>) {
  const err = await rejection(promise);
  expect(err).toBeInstanceOf(IdempotencyException);
  const e = err as IdempotencyException;
  return { status: e.getStatus(), reason: e.reason, headers: e.headers };
}

let errors: ReturnType<typeof jest.spyOn>;
let warnings: ReturnType<typeof jest.spyOn>;
// Inside each describe, not at the root: test/mutation/ imports this file next to others.
function spyOnLogger(): void {
  beforeEach(() => {
    errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    warnings = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });
  afterEach(() => {
    jest.restoreAllMocks();
    jest.useRealTimers();
  });
}

describe('IdempotencyService.begin: the key', () => {
  spyOnLogger();
  it('claims with the key, an owner token, the fingerprint, the lease and the route ttl', async () => {
    const { store, service } = setup({ leaseMs: 900 });
    const claim = (await service.begin(request('k-1'), context, route({ ttlMs: 77 })))!;
    const fingerprint = requestFingerprint('POST', '/pay?b=2&a=1', { amount: 1 }, 'Pay.create');
    expect(claim).toEqual({
      key: 'k-1',
      cacheKey: 'idem:%:k-1',
      owner: expect.stringMatching(UUID),
      fingerprint,
      ttlMs: 77,
      route: 'Pay.create',
      claimedAt: expect.any(Number),
    });
    expect(Math.abs(claim.claimedAt - Date.now())).toBeLessThan(1000);
    expect(store.calls).toEqual([['claim', 'idem:%:k-1', { owner: claim.owner, fingerprint, leaseMs: 900 }]]);
    const again = (await service.begin(request('k-2'), context, route()))!;
    expect(again.owner).not.toBe(claim.owner);
  });

  it('fingerprints originalUrl (Express sub-apps) before url', async () => {
    const { service } = setup();
    const claim = (await service.begin(request('k', { originalUrl: '/api/pay?a=1' }), context, route()))!;
    expect(claim.fingerprint).toBe(requestFingerprint('POST', '/api/pay?a=1', { amount: 1 }, 'Pay.create'));
  });

  it('reads the configured header name and the prefix', async () => {
    const { store, service } = setup({ headerName: 'X-Key', keyPrefix: 'pay:' });
    await service.begin(request(undefined, { headers: { 'x-key': 'abc' } }), context, route());
    expect(store.calls[0][1]).toBe('pay:%:abc');
    expect(await httpError(service.begin(request('abc'), context, route()))).toEqual({
      status: 400,
      reason: 'x-key header is required',
      headers: {},
    });
  });

  it('refuses a repeated header: joined the way Node joins it, the key has a space', async () => {
    const { store, service } = setup();
    expect(await httpError(service.begin(request(['a', 'b']), context, route()))).toEqual({
      status: 400,
      reason: 'idempotency-key has a control character or space at index 2',
      headers: {},
    });
    expect(store.calls).toEqual([]);
  });

  it('refuses a missing or blank key with 400, or passes it through when the route says so', async () => {
    const { store, service } = setup();
    for (const key of [undefined, '', ' ', '\t ']) {
      expect(await httpError(service.begin(request(key), context, route()))).toEqual({
        status: 400,
        reason: 'idempotency-key header is required',
        headers: {},
      });
      expect(await service.begin(request(key), context, route({ missingHeader: 'pass-through' }))).toBeUndefined();
    }
    expect(store.calls).toEqual([]);
  });

  it('refuses a key longer than maxKeyLength before reading it, and accepts one of exactly that length', async () => {
    const { store, service } = setup({ maxKeyLength: 5 });
    expect(await httpError(service.begin(request('abcdef'), context, route()))).toEqual({
      status: 400,
      reason: 'idempotency-key exceeds 5 characters',
      headers: {},
    });
    expect(await httpError(service.begin(request('      '), context, route({ missingHeader: 'pass-through' })))).toMatchObject({
      reason: 'idempotency-key exceeds 5 characters',
    });
    expect((await service.begin(request('abcde'), context, route()))!.key).toBe('abcde');
    expect(store.calls).toHaveLength(1);
  });

  it('refuses control characters and spaces, naming the index only', async () => {
    const { store, service } = setup();
    expect(await httpError(service.begin(request('ab c'), context, route()))).toEqual({
      status: 400,
      reason: 'idempotency-key has a control character or space at index 2',
      headers: {},
    });
    expect(store.calls).toEqual([]);
  });
});

describe('IdempotencyService.begin: the identity scope', () => {
  spyOnLogger();
  it('passes request and context to the identity function and escapes its scope into the key', async () => {
    const identity = jest.fn((_req: unknown, _ctx: ExecutionContext) => 'acct:1%');
    const { store, service } = setup();
    const req = request('k');
    await service.begin(req, context, route({ identity }));
    expect(identity).toHaveBeenCalledWith(req, context);
    expect(store.calls[0][1]).toBe('idem:acct%3A1%25:k');
  });

  it('awaits an async identity', async () => {
    const { store, service } = setup();
    await service.begin(request('k'), context, route({ identity: async () => 'bob' }));
    expect(store.calls[0][1]).toBe('idem:bob:k');
  });

  it('answers 500 for a resolver that returns no scope (not a string, or empty), naming the route in the log', async () => {
    const { store, service } = setup();
    for (const [bad, what] of [
      [42, 'number'],
      [undefined, 'undefined'],
      ['', 'an empty string'],
    ] as const) {
      expect(await httpError(service.begin(request('k'), context, route({ identity: () => bad as never })))).toEqual({
        status: 500,
        reason: 'the caller scope of this request could not be resolved',
        headers: {},
      });
      expect(errors).toHaveBeenLastCalledWith(`Pay.create: the identity resolver returned ${what}, not a scope; answering 500`);
    }
    expect(store.calls).toEqual([]);
  });

  it('refuses a scope that is too long once escaped, or has control characters', async () => {
    const { store, service } = setup({ maxScopeLength: 6 });
    expect(await httpError(service.begin(request('k'), context, route({ identity: () => 'a:b:' })))).toEqual({
      status: 400,
      reason: 'identity scope exceeds 6 characters',
      headers: {},
    });
    expect(await httpError(service.begin(request('k'), context, route({ identity: () => 'a b' })))).toEqual({
      status: 400,
      reason: 'identity scope has a control character or space at index 1',
      headers: {},
    });
    expect(store.calls).toEqual([]);
    await service.begin(request('k'), context, route({ identity: () => 'a:bc' }));
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
    const { store, service } = setup({}, { get: get as never });
    await service.prepareIdentity(Resolver);
    await service.begin(request('k1'), context, route({ identity: Resolver }));
    await service.begin(request('k2'), context, route({ identity: Resolver }));
    expect(get).toHaveBeenCalledTimes(1);
    expect(get).toHaveBeenCalledWith(Resolver, { strict: false });
    expect(store.calls.map((c) => c[1])).toEqual(['idem:got-k1:k1', 'idem:got-k2:k2']);

    const create = jest.fn(async (_type: unknown) => new Resolver('made'));
    const other = setup({}, {
      get: (() => {
        throw new Error('not a provider');
      }) as never,
      create: create as never,
    });
    await other.service.begin(request('k'), context, route({ identity: Resolver }));
    expect(create).toHaveBeenCalledWith(Resolver);
    expect(other.store.calls[0][1]).toBe('idem:made-k:k');
  });

  it('prepareIdentity leaves functions and no identity alone', async () => {
    const get = jest.fn();
    const { service } = setup({}, { get: get as never });
    await service.prepareIdentity(undefined);
    await service.prepareIdentity(() => 'x');
    expect(get).not.toHaveBeenCalled();
  });
});

describe('IdempotencyService.begin: the body and the store', () => {
  spyOnLogger();
  it('answers 400 to a body nested too deeply and rethrows other serialisation errors', async () => {
    const { store, service } = setup();
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(await httpError(service.begin(request('k', { body: deep }), context, route()))).toEqual({
      status: 400,
      reason: 'request body is nested too deeply',
      headers: {},
    });
    const boom = new TypeError('boom');
    const body = {
      toJSON() {
        throw boom;
      },
    };
    expect(await rejection(service.begin(request('k', { body }), context, route()))).toBe(boom);
    expect(store.calls).toEqual([]);
  });

  it('fails closed with 503 and Retry-After when the store cannot be reached', async () => {
    const { store, service } = setup();
    store.claimAnswer = () => Promise.reject(new Error('ECONNREFUSED'));
    expect(await httpError(service.begin(request('k'), context, route()))).toEqual({
      status: 503,
      reason: 'idempotency store unavailable; retry shortly',
      headers: { 'retry-after': '1' },
    });
    expect(errors).toHaveBeenCalledWith('Pay.create: claim failed, answering 503: ECONNREFUSED');
  });

  it('releases a claim whose outcome is unknown as soon as the store answers, retrying until the lease would be over', async () => {
    jest.useFakeTimers({ now: 0 });
    const { store, service } = setup({ leaseMs: 1000 });
    store.claimAnswer = () => Promise.reject(new Error('timed out'));
    let failures = 2;
    store.releaseAnswer = () => (failures-- > 0 ? Promise.reject(new Error('down')) : Promise.resolve(false));
    expect((await httpError(service.begin(request('k'), context, route()))).status).toBe(503);
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
    await rejection(service.begin(request('k2'), context, route()));
    await jest.advanceTimersByTimeAsync(10_000);
    // At 0, 100, 300 and 700 ms; the next pause would end past the lease.
    expect(releases()).toHaveLength(4);

    // A last attempt that ends exactly with the lease is still made.
    const edge = setup({ leaseMs: 700 });
    edge.store.claimAnswer = () => Promise.reject(new Error('timed out'));
    edge.store.releaseAnswer = () => Promise.reject(new Error('down'));
    await rejection(edge.service.begin(request('k3'), context, route()));
    await jest.advanceTimersByTimeAsync(10_000);
    expect(edge.store.calls.filter((c) => c[0] === 'release')).toHaveLength(4);
  });

  it('answers 415 for a body that nothing read, on either adapter; a read or empty body is fine', async () => {
    const { store, service } = setup();
    const unread = [
      { headers: { 'content-length': '5' }, readableEnded: false },
      { headers: { 'transfer-encoding': 'chunked' }, readableEnded: false },
      { headers: { 'content-length': '5' }, raw: { readableEnded: false } },
    ];
    for (const over of unread) {
      const req = request('k', over);
      req.headers = { ...req.headers, 'idempotency-key': 'k' };
      expect(await httpError(service.begin(req, context, route()))).toEqual({
        status: 415,
        reason: "request body is read by no body parser, so it cannot be checked against the key; register a parser for its media type (e.g. app.useBodyParser('text'))",
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
      await service.begin(req, context, route());
    }
    expect(store.calls).toHaveLength(fine.length);
  });

  it('answers a key in flight with 409 for the same request and 422 for another', async () => {
    const { store, service } = setup();
    const fingerprint = requestFingerprint('POST', '/pay?b=2&a=1', { amount: 1 }, 'Pay.create');
    store.claimAnswer = async () => ({ state: 'in-flight', fingerprint });
    expect(await httpError(service.begin(request('k'), context, route()))).toEqual({
      status: 409,
      reason: 'idempotency-key in-flight; retry shortly',
      headers: { 'retry-after': '1' },
    });
    store.claimAnswer = async () => ({ state: 'in-flight', fingerprint: 'other' });
    expect(await httpError(service.begin(request('k'), context, route()))).toEqual({
      status: 422,
      reason: 'idempotency-key was already used for a different request',
      headers: {},
    });
  });

  it('replays a completed key for the same request and answers 422 for another', async () => {
    const { store, service } = setup();
    const fingerprint = requestFingerprint('POST', '/pay?b=2&a=1', { amount: 1 }, 'Pay.create');
    store.claimAnswer = async () => ({ state: 'completed', record: { fingerprint, response } });
    const replay = await rejection(service.begin(request('k'), context, route()));
    expect(replay).toBeInstanceOf(IdempotentReplay);
    expect((replay as IdempotentReplay).response).toBe(response);
    store.claimAnswer = async () => ({ state: 'completed', record: { fingerprint: 'other', response } });
    expect(await httpError(service.begin(request('k'), context, route()))).toEqual({
      status: 422,
      reason: 'idempotency-key was already used for a different request',
      headers: {},
    });
  });
});

describe('IdempotencyService: commit, release, leases', () => {
  spyOnLogger();
  const claim: ActiveClaim = { key: 'k', cacheKey: 'idem:%:k', owner: 'me', fingerprint: 'fp', ttlMs: 500, route: 'Pay.create', claimedAt: Date.now() };

  it('commits the response for the route ttl, and only logs when that fails', async () => {
    const { store, service } = setup();
    await service.commit(claim, response);
    expect(store.calls).toEqual([['commit', 'idem:%:k', 'me', { fingerprint: 'fp', response }, 500]]);
    expect(warnings).not.toHaveBeenCalled();
    store.commitAnswer = async () => false;
    await service.commit(claim, response);
    expect(warnings).toHaveBeenCalledWith('Pay.create: response not stored: the claim had expired and the key was taken over');
    expect((warnings.mock.contexts[0] as { context?: string }).context).toBe('Idempotency');
    store.commitAnswer = () => Promise.reject(new Error('down'));
    await expect(service.commit(claim, response)).resolves.toBeUndefined();
    expect(errors).toHaveBeenCalledWith('Pay.create: response not stored, the claim expires with its lease: down');
  });

  it('releases the caller\'s claim, and only logs when that fails', async () => {
    const { store, service } = setup();
    await service.release(claim);
    expect(store.calls).toEqual([['release', 'idem:%:k', 'me']]);
    expect(errors).not.toHaveBeenCalled();
    store.releaseAnswer = () => Promise.reject(new Error('down'));
    await expect(service.release(claim)).resolves.toBeUndefined();
    expect(errors).toHaveBeenCalledWith('Pay.create: claim not released, it expires with its lease: down');
  });

  it('renews every held claim each third of the lease, with one timer, until unheld', async () => {
    jest.useFakeTimers();
    const { store, service } = setup({ leaseMs: 10 });
    const other = { ...claim, cacheKey: 'idem:%:k2', owner: 'you' };
    service.hold(claim);
    service.hold(other);
    expect(jest.getTimerCount()).toBe(1);
    jest.advanceTimersByTime(2);
    expect(store.calls).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(store.calls).toEqual([
      ['renew', 'idem:%:k', 'me', 10],
      ['renew', 'idem:%:k2', 'you', 10],
    ]);
    service.unhold(claim);
    store.calls.length = 0;
    jest.advanceTimersByTime(3);
    expect(store.calls).toEqual([['renew', 'idem:%:k2', 'you', 10]]);
    service.unhold(other);
    store.calls.length = 0;
    jest.advanceTimersByTime(30);
    expect(store.calls).toEqual([]);
    expect(jest.getTimerCount()).toBe(1);
    service.onModuleDestroy();
    expect(jest.getTimerCount()).toBe(0);
  });

  it('stops renewing a claim held for maxHoldMs, with a warning naming the route', async () => {
    jest.useFakeTimers({ now: 1_000 });
    const { store, service } = setup({ leaseMs: 30, maxHoldMs: 60 });
    const held = { ...claim, claimedAt: 1_000 };
    service.hold(held);
    jest.advanceTimersByTime(50);
    expect(store.calls).toHaveLength(5);
    expect(warnings).not.toHaveBeenCalled();
    jest.advanceTimersByTime(10);
    expect(store.calls).toHaveLength(5);
    expect(warnings).toHaveBeenCalledWith(
      'Pay.create: the handler has held its key for 60 ms (maxHoldMs) without finishing; the lease is no longer renewed and lapses, after which a retry runs the handler again',
    );
    jest.advanceTimersByTime(100);
    expect(store.calls).toHaveLength(5);
    expect(warnings).toHaveBeenCalledTimes(1);
    service.onModuleDestroy();
  });

  it('logs a lost lease and a failed renewal', async () => {
    jest.useFakeTimers();
    const { store, service } = setup({ leaseMs: 3 });
    service.hold(claim);
    store.renewAnswer = async () => false;
    await jest.advanceTimersByTimeAsync(1);
    expect(warnings).toHaveBeenCalledWith('Pay.create: lease lost while the handler was still running');
    expect(errors).not.toHaveBeenCalled();
    warnings.mockClear();
    store.renewAnswer = () => Promise.reject(new Error('timeout'));
    await jest.advanceTimersByTimeAsync(1);
    expect(errors).toHaveBeenCalledWith('Pay.create: lease renewal failed: timeout');
    expect(warnings).not.toHaveBeenCalled();
    store.renewAnswer = async () => true;
    errors.mockClear();
    await jest.advanceTimersByTimeAsync(1);
    expect(warnings).not.toHaveBeenCalled();
    expect(errors).not.toHaveBeenCalled();
    service.onModuleDestroy();
  });

  it('keeps its timer from holding the process open, and starts a new one after destroy', () => {
    const { service } = setup({ leaseMs: 60_000 });
    service.hold(claim);
    const timer = (service as unknown as { renewal: NodeJS.Timeout }).renewal;
    expect(timer.hasRef()).toBe(false);
    service.onModuleDestroy();
    expect((service as unknown as { renewal?: NodeJS.Timeout }).renewal).toBeUndefined();
    service.hold(claim);
    const next = (service as unknown as { renewal: NodeJS.Timeout }).renewal;
    expect(next).toBeDefined();
    expect(next).not.toBe(timer);
    service.onModuleDestroy();
  });

  it('forgets held claims on destroy', async () => {
    jest.useFakeTimers();
    const { store, service } = setup({ leaseMs: 3 });
    service.hold(claim);
    service.onModuleDestroy();
    service.hold({ ...claim, owner: 'new' });
    jest.advanceTimersByTime(1);
    expect(store.calls).toEqual([['renew', 'idem:%:k', 'new', 3]]);
    service.onModuleDestroy();
  });

  it('closes the store on shutdown, if it can be closed', async () => {
    const { store, service } = setup();
    await service.onApplicationShutdown();
    expect(store.closed).toBe(1);
    const bare = { claim: store.claim, commit: store.commit, release: store.release, renew: store.renew };
    const plain = new IdempotencyService(resolveModuleOptions({ cache: bare }), {} as ModuleRef);
    await expect(plain.onApplicationShutdown()).resolves.toBeUndefined();
  });
});

describe('IdempotencyService.routeOptions', () => {
  spyOnLogger();
  it('reads @Idempotent() metadata once per handler and names the handler in errors', () => {
    const { service } = setup({ ttlMs: 9 });
    const handler = () => undefined;
    Reflect.defineMetadata(IDEMPOTENT_ROUTE_METADATA, { ttlMs: 5 }, handler);
    class Pay {}
    const first = service.routeOptions(Pay, handler);
    expect(first).toEqual({ id: 'Pay.handler', ttlMs: 5, missingHeader: 'reject', identity: undefined });
    Reflect.defineMetadata(IDEMPOTENT_ROUTE_METADATA, { ttlMs: 6 }, handler);
    expect(service.routeOptions(Pay, handler)).toBe(first);
    const other = () => undefined;
    expect(service.routeOptions(Pay, other)).toEqual({ id: 'Pay.other', ttlMs: 9, missingHeader: 'reject', identity: undefined });
    const bad = () => undefined;
    Reflect.defineMetadata(IDEMPOTENT_ROUTE_METADATA, { ttlMs: -1 }, bad);
    expect(() => service.routeOptions(Pay, bad)).toThrow('@Idempotent(): ttlMs must be an integer from 1 to 31536000000, got -1');
    const named = () => undefined;
    Reflect.defineMetadata(IDEMPOTENT_ROUTE_METADATA, { ttlMs: -1 }, named);
    expect(() => service.routeOptions(Pay, named, '@Idempotent() on A.b()')).toThrow('@Idempotent() on A.b(): ttlMs');
  });
});
