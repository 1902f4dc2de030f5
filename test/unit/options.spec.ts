import { beforeEach, describe, expect, it } from '@jest/globals';
import { InMemoryCache, type IdempotencyStore } from '../../lib/index.js';
import { resolveModuleOptions, resolveRouteOptions } from '../../lib/utils/options.util.js';

const store = (): IdempotencyStore => new InMemoryCache();
const err = (message: string) => `IdempotencyModule: ${message}`;

describe('resolveModuleOptions', () => {
  it('fills in every documented default, with a store of its own', () => {
    const resolved = resolveModuleOptions({});
    expect(resolved).toEqual({
      store: expect.any(InMemoryCache),
      ttlMs: 86_400_000,
      leaseMs: 60_000,
      headerName: 'idempotency-key',
      keyPrefix: 'idem:',
      maxKeyLength: 255,
      maxScopeLength: 255,
      missingHeader: 'reject',
      identity: undefined,
    });
    expect(resolveModuleOptions({}).store).not.toBe(resolved.store);
  });

  it('keeps what was given and lower-cases the header name', () => {
    const cache = store();
    const identity = () => 'scope';
    expect(
      resolveModuleOptions({
        cache,
        ttlMs: 5,
        leaseMs: 3,
        headerName: 'X-Request-Key',
        keyPrefix: 'pay:',
        maxKeyLength: 1,
        maxScopeLength: 2,
        missingHeader: 'pass-through',
        identity,
      }),
    ).toEqual({
      store: cache,
      ttlMs: 5,
      leaseMs: 3,
      headerName: 'x-request-key',
      keyPrefix: 'pay:',
      maxKeyLength: 1,
      maxScopeLength: 2,
      missingHeader: 'pass-through',
      identity,
    });
  });

  it('refuses options that are not an object', () => {
    expect(() => resolveModuleOptions(null as never)).toThrow(err('options must be an object'));
    expect(() => resolveModuleOptions('x' as never)).toThrow(err('options must be an object'));
  });

  it.each(['claim', 'commit', 'release', 'renew'])('refuses a cache without %s()', (method) => {
    const cache = { claim() {}, commit() {}, release() {}, renew() {} } as Record<string, unknown>;
    expect(() => resolveModuleOptions({ cache: cache as never })).not.toThrow();
    cache[method] = 'not a function';
    expect(() => resolveModuleOptions({ cache: cache as never })).toThrow(
      err(`cache must implement IdempotencyStore (missing ${method}())`),
    );
  });

  it.each(['ttlMs', 'leaseMs', 'maxKeyLength', 'maxScopeLength'] as const)('%s must be a positive safe integer', (name) => {
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, '10', null]) {
      expect(() => resolveModuleOptions({ [name]: bad })).toThrow(err(`${name} must be a positive integer, got ${String(bad)}`));
    }
    expect(resolveModuleOptions({ [name]: 2 ** 53 - 1 })[name]).toBe(2 ** 53 - 1);
  });

  it('leaseMs is at least 3, as it is renewed every third', () => {
    expect(() => resolveModuleOptions({ leaseMs: 1 })).toThrow(err('leaseMs must be at least 3 (it is renewed every third)'));
    expect(() => resolveModuleOptions({ leaseMs: 2 })).toThrow(err('leaseMs must be at least 3 (it is renewed every third)'));
    expect(resolveModuleOptions({ leaseMs: 3 }).leaseMs).toBe(3);
  });

  it('headerName must be an HTTP token', () => {
    expect(resolveModuleOptions({ headerName: "!#$%&'*+.^_`|~09azAZ-" }).headerName).toBe("!#$%&'*+.^_`|~09azaz-");
    for (const bad of ['', 'a b', 'a:b', 'a\nb', 'ä', 'a"', 'a(b', 'a/b', ' a', 'a ', 42]) {
      expect(() => resolveModuleOptions({ headerName: bad as string })).toThrow(err('headerName must be a valid HTTP header name'));
    }
  });

  it('keyPrefix may be any string without control characters or spaces', () => {
    expect(resolveModuleOptions({ keyPrefix: '' }).keyPrefix).toBe('');
    expect(resolveModuleOptions({ keyPrefix: '!~é:' }).keyPrefix).toBe('!~é:');
    for (const bad of ['a b', 'a\x00', '\x1f', '\x7f', 'a\tb', 7]) {
      expect(() => resolveModuleOptions({ keyPrefix: bad as string })).toThrow(
        err('keyPrefix must be a string without control characters or spaces'),
      );
    }
  });

  it('missingHeader is reject or pass-through', () => {
    expect(resolveModuleOptions({ missingHeader: 'reject' }).missingHeader).toBe('reject');
    expect(() => resolveModuleOptions({ missingHeader: 'allow' as never })).toThrow(
      err("missingHeader must be 'reject' or 'pass-through', got allow"),
    );
  });

  it('identity is a function or a class', () => {
    class Resolver {
      resolve() {
        return 'x';
      }
    }
    expect(resolveModuleOptions({ identity: Resolver }).identity).toBe(Resolver);
    expect(() => resolveModuleOptions({ identity: 'user' as never })).toThrow(
      err('identity must be a function (req) => string or an injectable resolver class'),
    );
  });
});

describe('resolveRouteOptions', () => {
  const moduleIdentity = () => 'module';
  // Built in each test, not while jest collects them: a broken resolver must fail tests, not the file.
  let base: ReturnType<typeof resolveModuleOptions>;
  beforeEach(() => {
    base = resolveModuleOptions({ ttlMs: 1000, missingHeader: 'pass-through', identity: moduleIdentity });
  });

  it('inherits the module options', () => {
    expect(resolveRouteOptions('here', {}, base)).toEqual({ ttlMs: 1000, missingHeader: 'pass-through', identity: moduleIdentity });
  });

  it('overrides them per route; identity: undefined drops the module identity', () => {
    const route = () => 'route';
    expect(resolveRouteOptions('here', { ttlMs: 7, missingHeader: 'reject', identity: route }, base)).toEqual({
      ttlMs: 7,
      missingHeader: 'reject',
      identity: route,
    });
    expect(resolveRouteOptions('here', { identity: undefined }, base).identity).toBeUndefined();
  });

  it('names the handler in its errors', () => {
    expect(() => resolveRouteOptions('@Idempotent() on A.b()', { ttlMs: 0 }, base)).toThrow(
      '@Idempotent() on A.b(): ttlMs must be a positive integer, got 0',
    );
    expect(() => resolveRouteOptions('here', { missingHeader: 'no' as never }, base)).toThrow(
      "here: missingHeader must be 'reject' or 'pass-through', got no",
    );
    expect(() => resolveRouteOptions('here', { identity: 1 as never }, base)).toThrow(
      'here: identity must be a function (req) => string or an injectable resolver class',
    );
  });
});
