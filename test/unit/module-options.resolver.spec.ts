import { describe, expect, it, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import {
  InMemoryStore,
  RedisStore,
  type IdempotencyModuleOptions,
  type IdempotencyStore,
  type IdempotencyTransactions,
} from '../../lib/index.js';
import { resolveModuleOptions as resolveWith } from '../../lib/shared/options/module-options.resolver.js';

const store = (): IdempotencyStore => new InMemoryStore();
/** As the module calls it: an InMemoryStore of its own unless `store` is given. */
const resolveModuleOptions = (options: IdempotencyModuleOptions, registration?: string) =>
  resolveWith(options, store, registration);
const err = (message: string) => `IdempotencyModule: ${message}`;

describe('resolveModuleOptions', () => {
  it('fills in every documented default, with a store of its own', () => {
    const resolved = resolveModuleOptions({});
    expect(resolved).toEqual({
      store: expect.any(InMemoryStore),
      ttlMs: 86_400_000,
      leaseMs: 60_000,
      maxHoldMs: 600_000,
      maxResponseBytes: 8_388_608,
      headerName: 'idempotency-key',
      keyPrefix: 'idem:',
      maxKeyLength: 255,
      maxScopeLength: 255,
      missingHeader: 'reject',
      fingerprint: 'canonical',
      errorFormat: 'json',
      problemTypeBaseUrl: 'urn:nestjs-idempotency:problem:',
      errorBody: undefined,
      echoKeyHeader: false,
      openApi: true,
      events: undefined,
      encryption: undefined,
      openTelemetry: true,
      replayFlag: 'header',
      replayedHeader: 'idempotent-replayed',
      identity: undefined,
      transactions: undefined,
      transactionTimeoutMs: 30_000,
      inFlight: 'conflict',
      waitMs: 5_000,
      maxWaiters: 1_000,
      maxMutationsPerRequest: 10,
      completer: { intervalMs: 0, idleMs: 60_000, batch: 10 },
    });
    expect(resolveModuleOptions({}).store).not.toBe(resolved.store);
  });

  it('keeps what was given and lower-cases the header name', () => {
    const cache = store();
    const identity = () => 'scope';
    const errorBody = () => ({});
    const onEvent = () => undefined;
    const transactions: IdempotencyTransactions = { run: (work) => work({ query: () => Promise.resolve([]) }) };
    expect(
      resolveModuleOptions({
        store: cache,
        ttlMs: 5,
        leaseMs: 3,
        maxHoldMs: 4,
        maxResponseBytes: 9,
        headerName: 'X-Request-Key',
        keyPrefix: 'pay:',
        maxKeyLength: 1,
        maxScopeLength: 2,
        missingHeader: 'pass-through',
        fingerprint: 'raw',
        errorFormat: 'problem+json',
        problemTypeBaseUrl: 'https://api.example.com/problems/',
        errorBody,
        echoKeyHeader: true,
        openApi: false,
        events: onEvent,
        openTelemetry: false,
        encryption: { keys: { 'k-1': Buffer.alloc(32, 1) }, current: 'k-1' },
        replayFlag: 'header-and-body',
        replayedHeader: 'X-Replayed',
        identity,
        transactions,
        transactionTimeoutMs: 3,
        inFlight: 'wait',
        waitMs: 250,
        maxWaiters: 7,
        maxMutationsPerRequest: 3,
        completer: { intervalMs: 5, idleMs: 0, batch: 1 },
      }),
    ).toEqual({
      store: cache,
      ttlMs: 5,
      leaseMs: 3,
      maxHoldMs: 4,
      maxResponseBytes: 9,
      headerName: 'x-request-key',
      keyPrefix: 'pay:',
      maxKeyLength: 1,
      maxScopeLength: 2,
      missingHeader: 'pass-through',
      fingerprint: 'raw',
      errorFormat: 'problem+json',
      problemTypeBaseUrl: 'https://api.example.com/problems/',
      errorBody,
      echoKeyHeader: true,
      openApi: false,
      events: onEvent,
      openTelemetry: false,
      encryption: { keys: new Map([['k-1', Buffer.alloc(32, 1)]]), current: 'k-1', acceptUnsealedUntil: 0 },
      replayFlag: 'header-and-body',
      replayedHeader: 'x-replayed',
      identity,
      transactions,
      transactionTimeoutMs: 3,
      inFlight: 'wait',
      waitMs: 250,
      maxWaiters: 7,
      maxMutationsPerRequest: 3,
      completer: { intervalMs: 5, idleMs: 0, batch: 1 },
    });
  });

  it('transactions must have run(); transactionTimeoutMs is a timer duration of at least 3 ms', () => {
    for (const bad of [null, {}, { run: 'x' }, 'run']) {
      expect(() => resolveModuleOptions({ transactions: bad as never })).toThrow(
        err('transactions must be an IdempotencyTransactions: an object with run(work), e.g. clsTransactions(txHost)'),
      );
    }
    for (const bad of [2, 2 ** 31, 1.5]) {
      expect(() => resolveModuleOptions({ transactionTimeoutMs: bad })).toThrow(
        err(`transactionTimeoutMs must be an integer from 3 to 2147483647, got ${bad}`),
      );
    }
    expect(resolveModuleOptions({ transactionTimeoutMs: 2 ** 31 - 1 }).transactionTimeoutMs).toBe(2 ** 31 - 1);
  });

  it('refuses options that are not an object', () => {
    expect(() => resolveModuleOptions(null as never)).toThrow(err('options must be an object'));
    expect(() => resolveModuleOptions('x' as never)).toThrow(err('options must be an object'));
  });

  it('store is the option; cache, its deprecated name, takes the same value with one warning per process; not both', () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      const mine = store();
      expect(resolveModuleOptions({ store: mine }).store).toBe(mine);
      expect(warn).not.toHaveBeenCalled();
      expect(resolveModuleOptions({ cache: mine }).store).toBe(mine);
      expect(resolveModuleOptions({ cache: store() }).store).not.toBe(mine);
      // The first use of cache in this file (jest gives each file its own modules): one warning, then none.
      expect(warn.mock.calls).toEqual([
        ['IdempotencyModule: the option cache is deprecated and will be removed in 1.0; name it store (same value)'],
      ]);
      expect(() => resolveModuleOptions({ store: mine, cache: mine })).toThrow(
        err('give store or cache (its deprecated name), not both'),
      );
      const broken = { ...mine, claim: undefined } as unknown as IdempotencyStore;
      expect(() => resolveModuleOptions({ store: broken })).toThrow(
        err('store must implement IdempotencyStore (missing claim())'),
      );
    } finally {
      warn.mockRestore();
    }
  });

  it.each([
    ['redis', "store takes a store instance, not the string 'redis': pass new RedisStore({ url: process.env.REDIS_URL })"],
    [
      'Postgres',
      "store takes a store instance, not the string 'Postgres': pass new PostgresStore({ connectionString: process.env.DATABASE_URL })",
    ],
    ['memory', "store takes a store instance, not the string 'memory': pass new InMemoryStore()"],
    ['sqlite', "store takes a store instance, not the string 'sqlite': pass new SqliteStore({ filename: 'idempotency.db' })"],
    [
      'mongo',
      "store takes a store instance, not the string 'mongo': pass new InMemoryStore(), new RedisStore({ url }), new PostgresStore({ connectionString }) or new SqliteStore({ filename })",
    ],
  ])('a store named by the string %j is refused with the instance to pass', (name, message) => {
    expect(() => resolveModuleOptions({ store: name as never })).toThrow(err(message));
  });

  it('a store class, a factory function or an object that is no store is refused with what to pass', () => {
    expect(() => resolveModuleOptions({ store: RedisStore as never })).toThrow(
      err('store takes a store instance, not the class RedisStore: pass new RedisStore({ url: process.env.REDIS_URL })'),
    );
    class LedgerStore {}
    expect(() => resolveModuleOptions({ store: LedgerStore as never })).toThrow(
      err('store takes a store instance, not the class LedgerStore: pass new LedgerStore(...)'),
    );
    expect(() => resolveModuleOptions({ store: (() => new InMemoryStore()) as never })).toThrow(
      err(
        'store takes a store instance, not a function: pass new InMemoryStore(), new RedisStore({ url }), new PostgresStore({ connectionString }) or new SqliteStore({ filename }) (a factory belongs in forRootAsync({ useFactory }))',
      ),
    );
    expect(() => resolveModuleOptions({ store: { url: 'redis://x' } as never })).toThrow(
      err(
        'store must implement IdempotencyStore (missing claim()): pass new InMemoryStore(), new RedisStore({ url }), new PostgresStore({ connectionString }) or new SqliteStore({ filename }), or a store of your own',
      ),
    );
  });

  it.each(['claim', 'commit', 'release', 'renew'])('refuses a cache without %s()', (method) => {
    const cache = { claim() {}, commit() {}, release() {}, renew() {} } as Record<string, unknown>;
    expect(() => resolveModuleOptions({ cache: cache as never })).not.toThrow();
    cache[method] = 'not a function';
    expect(() => resolveModuleOptions({ cache: cache as never })).toThrow(
      err(`cache must implement IdempotencyStore (missing ${method}())`),
    );
  });

  it.each(['maxKeyLength', 'maxScopeLength'] as const)('%s must be a positive safe integer', (name) => {
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, '10', null]) {
      expect(() => resolveModuleOptions({ [name]: bad })).toThrow(
        err(`${name} must be an integer from 1 to ${2 ** 53 - 1}, got ${bad === '10' ? "the string '10'" : String(bad)}`),
      );
    }
    expect(resolveModuleOptions({ [name]: 2 ** 53 - 1 })[name]).toBe(2 ** 53 - 1);
  });

  it.each([
    ['ttlMs', 1, 31_536_000_000],
    ['leaseMs', 3, 2_147_483_647],
    ['maxHoldMs', 60_000, 2_147_483_647],
  ] as const)('%s is an integer from %d to %d, named with its limits when it is not', (name, min, max) => {
    for (const bad of [min - 1, max + 1, 1e12 * 1e6, 1.5 + min, Number.NaN, '10', null]) {
      expect(() => resolveModuleOptions({ [name]: bad })).toThrow(
        err(`${name} must be an integer from ${min} to ${max}, got ${bad === '10' ? "the string '10'" : String(bad)}`),
      );
    }
    expect(resolveModuleOptions({ [name]: min })[name]).toBe(min);
    expect(resolveModuleOptions({ [name]: max })[name]).toBe(max);
  });

  it('says a string is a string, and shows at most 60 characters of it', () => {
    expect(() => resolveModuleOptions({ ttlMs: '3600000' as never })).toThrow(
      err("ttlMs must be an integer from 1 to 31536000000, got the string '3600000'"),
    );
    expect(() => resolveModuleOptions({ ttlMs: 'x'.repeat(100) as never })).toThrow(`got the string '${'x'.repeat(60)}'`);
  });

  it('maxHoldMs defaults to 10 minutes or leaseMs when longer, and is never below leaseMs', () => {
    expect(resolveModuleOptions({}).maxHoldMs).toBe(600_000);
    expect(resolveModuleOptions({ leaseMs: 900_000 }).maxHoldMs).toBe(900_000);
    expect(resolveModuleOptions({ leaseMs: 1000, maxHoldMs: 1000 }).maxHoldMs).toBe(1000);
    expect(resolveModuleOptions({ maxResponseBytes: 536_870_912 }).maxResponseBytes).toBe(536_870_912);
    expect(() => resolveModuleOptions({ maxResponseBytes: 536_870_913 })).toThrow(
      'maxResponseBytes must be an integer from 1 to 536870912',
    );
    expect(() => resolveModuleOptions({ maxResponseBytes: 0 })).toThrow(
      'maxResponseBytes must be an integer from 1 to 536870912',
    );
    expect(() => resolveModuleOptions({ leaseMs: 1000, maxHoldMs: 999 })).toThrow(
      err('maxHoldMs must be an integer from 1000 to 2147483647, got 999'),
    );
  });

  it('refuses an unknown option, naming the one it most likely meant', () => {
    const valid =
      'valid: store, ttlMs, leaseMs, maxHoldMs, maxResponseBytes, headerName, keyPrefix, maxKeyLength, maxScopeLength, missingHeader, fingerprint, errorFormat, problemTypeBaseUrl, errorBody, echoKeyHeader, openApi, events, encryption, openTelemetry, replayFlag, replayedHeader, identity';
    expect(() => resolveModuleOptions({ stores: store() } as never)).toThrow(
      err(`unknown option "stores" (did you mean store?); ${valid}`),
    );
    expect(() => resolveModuleOptions({ Store: 1 } as never)).toThrow(
      err(`unknown option "Store" (did you mean store?); ${valid}`),
    );
    expect(() => resolveModuleOptions({ ttl: 1 } as never)).toThrow('(did you mean ttlMs?)');
    expect(() => resolveModuleOptions({ lease: 1 } as never)).toThrow('(did you mean leaseMs?)');
    expect(() => resolveModuleOptions({ header: 'x' } as never)).toThrow('(did you mean headerName?)');
    expect(() => resolveModuleOptions({ prefix: 'x' } as never)).toThrow('(did you mean keyPrefix?)');
    expect(() => resolveModuleOptions({ leaseMS: 1 } as never)).toThrow('(did you mean leaseMs?)');
    expect(() => resolveModuleOptions({ headername: 1 } as never)).toThrow('(did you mean headerName?)');
    expect(() => resolveModuleOptions({ maxKeyLengt: 1 } as never)).toThrow('(did you mean maxKeyLength?)');
    expect(() => resolveModuleOptions({ zzzzzzzz: 1 } as never)).toThrow(err(`unknown option "zzzzzzzz"; ${valid}`));
    // Three edits away is too far to guess; the whole name counts, its last letter too.
    expect(() => resolveModuleOptions({ zzzMs: 1 } as never)).toThrow(err(`unknown option "zzzMs"; ${valid}`));
    expect(() => resolveModuleOptions({ ttlMsXYZ: 1 } as never)).toThrow(err(`unknown option "ttlMsXYZ"; ${valid}`));
    expect(() => resolveModuleOptions({ ttlMsXY: 1 } as never)).toThrow('(did you mean ttlMs?)');
  });

  it('says which options belong to forRoot()/forRootAsync() themselves', () => {
    expect(() => resolveModuleOptions({ isGlobal: false } as never, 'forRootAsync()')).toThrow(
      err(
        'isGlobal is an option of forRootAsync() itself; the options its factory returns cannot change how the module is registered',
      ),
    );
    for (const key of ['imports', 'inject', 'useFactory', 'useClass', 'useExisting', 'extraProviders']) {
      expect(() => resolveModuleOptions({ [key]: [] }, 'forRootAsync()')).toThrow(
        err(`${key} is an option of forRootAsync() itself`),
      );
    }
    expect(() => resolveModuleOptions({ imports: [] } as never, 'forRoot()')).toThrow(
      err('imports is an option of forRootAsync(), not of forRoot()'),
    );
    expect(() => resolveModuleOptions({ imports: [] } as never)).toThrow(err('unknown option "imports"'));
  });

  it('headerName must be an HTTP token', () => {
    expect(resolveModuleOptions({ headerName: "!#$%&'*+.^_`|~09azAZ-" }).headerName).toBe("!#$%&'*+.^_`|~09azaz-");
    for (const bad of ['', 'a b', 'a:b', 'a\nb', 'ä', 'a"', 'a(b', 'a/b', ' a', 'a ', 42]) {
      expect(() => resolveModuleOptions({ headerName: bad as string })).toThrow(
        err('headerName must be a valid HTTP header name'),
      );
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

  it("inFlight is 'conflict' or 'wait'; waitMs a timer duration; maxWaiters from 1 to a million", () => {
    expect(resolveModuleOptions({ inFlight: 'wait' })).toMatchObject({ inFlight: 'wait', waitMs: 5_000, maxWaiters: 1_000 });
    expect(resolveModuleOptions({ inFlight: 'conflict', waitMs: 1, maxWaiters: 1 })).toMatchObject({ waitMs: 1, maxWaiters: 1 });
    expect(resolveModuleOptions({ waitMs: 2 ** 31 - 1, maxWaiters: 1_000_000 })).toMatchObject({
      waitMs: 2 ** 31 - 1,
      maxWaiters: 1_000_000,
    });
    for (const bad of ['block', 'Wait', true]) {
      expect(() => resolveModuleOptions({ inFlight: bad as never })).toThrow(
        err(`inFlight must be 'conflict' or 'wait', got ${String(bad)}`),
      );
    }
    for (const bad of [0, 2 ** 31, 1.5, '100']) {
      expect(() => resolveModuleOptions({ waitMs: bad as never })).toThrow(err('waitMs must be an integer from 1 to 2147483647'));
    }
    for (const bad of [0, 1_000_001, 2.5]) {
      expect(() => resolveModuleOptions({ maxWaiters: bad })).toThrow(err('maxWaiters must be an integer from 1 to 1000000'));
      expect(() => resolveModuleOptions({ maxMutationsPerRequest: bad })).toThrow(
        err('maxMutationsPerRequest must be an integer from 1 to 1000'),
      );
    }
  });

  it('completer: off unless given; {} takes the defaults; each number bounded, no other key', () => {
    expect(resolveModuleOptions({}).completer).toEqual({ intervalMs: 0, idleMs: 60_000, batch: 10 });
    expect(resolveModuleOptions({ completer: {} }).completer).toEqual({ intervalMs: 60_000, idleMs: 60_000, batch: 10 });
    expect(resolveModuleOptions({ completer: { intervalMs: 0, batch: 1_000 } }).completer).toEqual({
      intervalMs: 0,
      idleMs: 60_000,
      batch: 1_000,
    });
    for (const bad of [null, true, 'on']) {
      expect(() => resolveModuleOptions({ completer: bad as never })).toThrow(
        err('completer must be an object: { intervalMs?, idleMs?, batch? }'),
      );
    }
    expect(() => resolveModuleOptions({ completer: { batch: 0 } })).toThrow(
      err('completer.batch must be an integer from 1 to 1000'),
    );
    expect(() => resolveModuleOptions({ completer: { batch: 1_001 } })).toThrow(
      err('completer.batch must be an integer from 1 to 1000'),
    );
    expect(() => resolveModuleOptions({ completer: { idleMs: -1 } })).toThrow(err('completer.idleMs must be an integer from 0'));
    expect(() => resolveModuleOptions({ completer: { intervalMs: 2 ** 31 } })).toThrow(
      err('completer.intervalMs must be an integer'),
    );
    expect(() => resolveModuleOptions({ completer: { interval: 5 } as never })).toThrow(
      'IdempotencyModule completer: unknown option "interval" (did you mean intervalMs?)',
    );
  });

  it("fingerprint is 'canonical' or 'raw'", () => {
    expect(resolveModuleOptions({ fingerprint: 'raw' }).fingerprint).toBe('raw');
    expect(resolveModuleOptions({ fingerprint: 'canonical' }).fingerprint).toBe('canonical');
    for (const bad of ['bytes', true, null]) {
      expect(() => resolveModuleOptions({ fingerprint: bad as never })).toThrow(
        err(`fingerprint must be 'canonical', 'raw' or a function (req) => value, got ${String(bad)}`),
      );
    }
  });

  it("errorFormat is 'json' or 'problem+json'; problemTypeBaseUrl an absolute URI prefix", () => {
    expect(resolveModuleOptions({ errorFormat: 'problem+json' }).errorFormat).toBe('problem+json');
    expect(resolveModuleOptions({ errorFormat: 'json' }).errorFormat).toBe('json');
    for (const bad of ['problem', 'application/problem+json', 1]) {
      expect(() => resolveModuleOptions({ errorFormat: bad as never })).toThrow(
        err(`errorFormat must be 'json' or 'problem+json', got ${String(bad)}`),
      );
    }
    for (const good of ['https://api.example.com/problems/', 'urn:x:', 'tag:example.com,2026:p/']) {
      expect(resolveModuleOptions({ problemTypeBaseUrl: good }).problemTypeBaseUrl).toBe(good);
    }
    for (const bad of ['/problems/', 'https://a b/', 'https://a/\n', '', 7, '1http://x/']) {
      expect(() => resolveModuleOptions({ problemTypeBaseUrl: bad as never })).toThrow(
        err(
          'problemTypeBaseUrl must be an absolute URI prefix (scheme first, no white space), e.g. https://api.example.com/problems/',
        ),
      );
    }
  });

  it('errorBody is a function; echoKeyHeader true or false', () => {
    for (const bad of [{}, 'stripe', null]) {
      expect(() => resolveModuleOptions({ errorBody: bad as never })).toThrow(
        err('errorBody must be a function ({ status, code, message }) => body'),
      );
    }
    for (const bad of ['true', 1, null]) {
      expect(() => resolveModuleOptions({ echoKeyHeader: bad as never })).toThrow(
        err(`echoKeyHeader must be true or false, got ${bad === 'true' ? "the string 'true'" : String(bad)}`),
      );
    }
    expect(resolveModuleOptions({ echoKeyHeader: false }).echoKeyHeader).toBe(false);
    expect(() => resolveModuleOptions({ openApi: 'no' as never })).toThrow(
      err("openApi must be true or false, got the string 'no'"),
    );
    const key = Buffer.alloc(32, 7);
    for (const [encryption, message] of [
      [null, 'encryption must be { keys: { <id>: <32-byte Buffer> }, current: <id> }'],
      [{ current: 'a' }, 'encryption must be { keys: { <id>: <32-byte Buffer> }, current: <id> }'],
      [{ keys: { 'a b': key }, current: 'a b' }, 'encryption key id "a b" must be 1 to 64 of A-Z a-z 0-9 . _ -'],
      [{ keys: { ['x'.repeat(65)]: key }, current: 'x' }, `encryption key id "${'x'.repeat(65)}" must be 1 to 64 of`],
      [
        { keys: { a: Buffer.alloc(16) }, current: 'a' },
        'encryption key a must be 32 bytes (a Buffer or Uint8Array) for AES-256-GCM',
      ],
      [{ keys: { a: 'x'.repeat(32) }, current: 'a' }, 'encryption key a must be 32 bytes'],
      [{ keys: { a: key }, current: 'b' }, 'encryption.current must be the id of one of encryption.keys'],
      [{ keys: {}, current: 'a' }, 'encryption.current must be the id of one of encryption.keys'],
      [{ keys: { a: key }, current: 'a', acceptUnsealedUntil: 'soon' }, 'encryption.acceptUnsealedUntil must be a Date or epoch'],
      [{ keys: { a: key }, current: 'a', acceptUnsealedUntil: -1 }, 'encryption.acceptUnsealedUntil must be a Date or epoch'],
      [{ keys: { a: key }, current: 'a', acceptUnsealedUntil: new Date(NaN) }, 'encryption.acceptUnsealedUntil must be a Date'],
    ] as const) {
      expect(() => resolveModuleOptions({ encryption: encryption as never })).toThrow(message);
    }
    // The keys are copied: zeroing the application's buffer afterwards changes nothing.
    const mine = Buffer.alloc(32, 9);
    const resolved = resolveModuleOptions({ encryption: { keys: { a: mine }, current: 'a' } });
    mine.fill(0);
    expect(resolved.encryption!.keys.get('a')).toEqual(Buffer.alloc(32, 9));
    expect(() => resolveModuleOptions({ openTelemetry: 1 as never })).toThrow(err('openTelemetry must be true or false, got 1'));
    for (const events of [{ onIdempotencyEvent() {} }, 'log', null]) {
      expect(() => resolveModuleOptions({ events: events as never })).toThrow(
        err('events must be a function (event) => void or an injectable class with onIdempotencyEvent(event)'),
      );
    }
  });

  it('takes each documented replayFlag as given', () => {
    for (const flag of ['header', 'body', 'header-and-body'] as const) {
      expect(resolveModuleOptions({ replayFlag: flag }).replayFlag).toBe(flag);
    }
  });

  it('replayFlag is header, body or both; replayedHeader a header name or false, and no header when the flag is the body only', () => {
    expect(resolveModuleOptions({ replayFlag: 'body' })).toMatchObject({ replayFlag: 'body', replayedHeader: false });
    expect(resolveModuleOptions({ replayFlag: 'header-and-body', replayedHeader: 'Idempotency-Replayed' })).toMatchObject({
      replayFlag: 'header-and-body',
      replayedHeader: 'idempotency-replayed',
    });
    expect(resolveModuleOptions({ replayedHeader: false })).toMatchObject({ replayFlag: 'header', replayedHeader: false });
    for (const bad of ['headers', true, 'none']) {
      expect(() => resolveModuleOptions({ replayFlag: bad as never })).toThrow(
        err(`replayFlag must be 'header', 'body' or 'header-and-body', got ${String(bad)}`),
      );
    }
    for (const bad of ['', 'has space', 'a:b', true, 0]) {
      expect(() => resolveModuleOptions({ replayedHeader: bad as never })).toThrow(
        err('replayedHeader must be a header name (an HTTP token) or false'),
      );
    }
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
