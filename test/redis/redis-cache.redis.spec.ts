import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import { Cluster, Redis } from 'ioredis';
// ioredis 5 beside 6 (an npm alias): both majors are supported, and many apps still have 5.
import { Cluster as Cluster5, Redis as Redis5 } from 'ioredis5';
import { RedisCache, RedisCacheOptions } from '../../lib/compat/index.js';
import { RedisStore } from '../../lib/index.js';
import { RedisCluster, RedisServer, clusterAvailable, redisAvailable } from '../support/redis-server.js';
import { sampleRecord, storeContract } from '../support/store-contract.js';
import { sleep } from '../support/timing.js';
import { encodeRecord } from '../../lib/stores/shared/store-value.codec.js';

const describeRedis = redisAvailable('RedisStore store suite') ? describe : describe.skip;
const describeCluster = clusterAvailable('RedisStore cluster suite') ? describe : describe.skip;

describeRedis('RedisStore on a standalone redis-server', () => {
  let server: RedisServer;
  let cache: RedisStore;
  let another: RedisStore | undefined;
  beforeAll(async () => {
    server = await RedisServer.start();
  });
  afterAll(async () => {
    await cache?.close();
    await another?.close();
    await server?.stop();
  });

  storeContract(
    'RedisStore (URL client)',
    async () => {
      cache = new RedisStore({ url: server.url });
      return cache;
    },
    undefined,
    async (_, key, value, ttlMs) => void server.cli('SET', key, value.toString('latin1'), 'PX', String(ttlMs)),
    // Another pod's store: a connection of its own to the same server.
    () => (another = new RedisStore({ url: server.url })),
  );

  it('a claim answered for its time bound never holds the key afterwards: its release runs after it', async () => {
    const slow = new RedisStore({ url: server.url, commandTimeoutMs: 200 });
    const other = new RedisStore({ url: server.url });
    try {
      await slow.ping?.();
      // Redis answers nothing for 800 ms: the claim times out (503 upstream) and runs when the pause ends.
      server.cli('CLIENT', 'PAUSE', '800', 'ALL');
      // Three claims of one turn: one command, given up on together.
      const late = ['idem:late', 'idem:late-2', 'idem:late-3'];
      const given = await Promise.allSettled(
        late.map((key) => slow.claim(key, { owner: 'late', fingerprint: 'f', leaseMs: 30_000 })),
      );
      expect(given.map((g) => g.status)).toEqual(['rejected', 'rejected', 'rejected']);
      await sleep(1_200);
      // Without the release behind each, its 30 s lease would hold the key with no handler running.
      for (const key of late)
        expect(await other.claim(key, { owner: 'next', fingerprint: 'f', leaseMs: 1_000 })).toEqual({ state: 'claimed' });
    } finally {
      await slow.close();
      await other.close();
    }
  });

  it('keeps a record for ttlMs to the millisecond (PX, not seconds)', async () => {
    await cache.claim('idem:px', { owner: 'o', fingerprint: 'f', leaseMs: 1234 });
    const lease = Number(server.cli('PTTL', 'idem:px'));
    expect(lease).toBeGreaterThan(1000);
    expect(lease).toBeLessThanOrEqual(1234);
    await cache.commit('idem:px', 'o', sampleRecord('f'), 2500);
    const ttl = Number(server.cli('PTTL', 'idem:px'));
    expect(ttl).toBeGreaterThan(2300);
    expect(ttl).toBeLessThanOrEqual(2500);
  });

  it('uses one EVALSHA per operation: claim, replay and conflict cost one command each', async () => {
    // Warm the script cache: the first call of each script falls back to EVAL once.
    await cache.claim('idem:warm', { owner: 'w', fingerprint: 'f', leaseMs: 1000 });
    await cache.commit('idem:warm', 'w', sampleRecord('f'), 1000);
    server.cli('CONFIG', 'RESETSTAT');
    await cache.claim('idem:count', { owner: 'a', fingerprint: 'f', leaseMs: 1000 });
    await cache.commit('idem:count', 'a', sampleRecord('f'), 1000);
    expect(server.commandStats().evalsha).toBe(2);
    server.cli('CONFIG', 'RESETSTAT');
    await cache.claim('idem:count', { owner: 'b', fingerprint: 'f', leaseMs: 1000 });
    expect(server.commandStats().evalsha).toBe(1);
    const stats = server.commandStats();
    expect(Object.keys(stats).filter((c) => !['evalsha', 'get', 'set', 'config|resetstat', 'info'].includes(c))).toEqual([]);
  });

  it("sends one turn's claims as one command on its own client, each answered as if alone", async () => {
    await cache.claim('idem:turn-done', { owner: 'd', fingerprint: 'f', leaseMs: 5000 });
    await cache.commit('idem:turn-done', 'd', sampleRecord('f'), 5000);
    await cache.claim('idem:turn-held', { owner: 'h', fingerprint: 'f', leaseMs: 5000 });
    server.cli('CONFIG', 'RESETSTAT');
    const asked = [
      ...Array.from({ length: 8 }, (_, i) => ({ key: `idem:turn-${i}`, owner: `o${i}` })),
      { key: 'idem:turn-twice', owner: 'first' },
      { key: 'idem:turn-twice', owner: 'second' },
      { key: 'idem:turn-done', owner: 'late' },
      { key: 'idem:turn-held', owner: 'dup' },
    ];
    const outcomes = await Promise.all(asked.map((a) => cache.claim(a.key, { owner: a.owner, fingerprint: 'f', leaseMs: 5000 })));
    expect(server.commandStats().evalsha).toBe(1);
    expect(outcomes.map((o) => o.state)).toEqual([...Array(9).fill('claimed'), 'in-flight', 'completed', 'in-flight']);
    // Each key holds the claim of the first who asked for it, with that claim's own lease.
    expect(server.cli('GET', 'idem:turn-twice').trim()).toBe('Cfirst\nf');
    expect(server.cli('GET', 'idem:turn-3').trim()).toBe('Co3\nf');
    expect(Number(server.cli('PTTL', 'idem:turn-3'))).toBeGreaterThan(4000);
    // A client passed in may be a Cluster's: one script per key there.
    const own = new Redis(server.url);
    const shared = new RedisStore({ client: own });
    await shared.claim('idem:turn-shared-warm', { owner: 'o', fingerprint: 'f', leaseMs: 5000 });
    server.cli('CONFIG', 'RESETSTAT');
    const keys = ['a', 'b', 'c'].map((k) => `idem:turn-shared-${k}`);
    await Promise.all(keys.map((key) => shared.claim(key, { owner: 'o', fingerprint: 'f', leaseMs: 5000 })));
    expect(server.commandStats().evalsha).toBe(3);
    own.disconnect();
  });

  it("sends one turn's commits as one command, each fenced by its own owner; a key of another type fails its commit alone", async () => {
    const keys = Array.from({ length: 6 }, (_, i) => `idem:commits-${i}`);
    for (const key of keys) await cache.claim(key, { owner: key, fingerprint: 'f', leaseMs: 5000 });
    // Taken over by a hash in the meantime: that commit fails with Redis's error, the others land.
    server.cli('DEL', keys[4]);
    server.cli('HSET', keys[4], 'field', 'value');
    server.cli('CONFIG', 'RESETSTAT');
    const answers = await Promise.allSettled(
      keys.map((key, i) => cache.commit(key, i === 2 ? 'not-the-owner' : key, sampleRecord(`f${i}`), 5000)),
    );
    expect(server.commandStats().evalsha).toBe(1);
    expect(answers.map((a) => (a.status === 'fulfilled' ? a.value : 'failed'))).toEqual([
      true,
      true,
      false,
      true,
      'failed',
      true,
    ]);
    expect(String((answers[4] as PromiseRejectedResult).reason)).toContain('WRONGTYPE');
    expect(await cache.claim(keys[5], { owner: 'x', fingerprint: 'f5', leaseMs: 5000 })).toMatchObject({ state: 'completed' });
    expect(await cache.claim(keys[2], { owner: 'x', fingerprint: 'f', leaseMs: 5000 })).toMatchObject({ state: 'in-flight' });
    // One key per script on a client passed in: the same error for the same key.
    const own = new Redis(server.url);
    try {
      await expect(new RedisStore({ client: own }).commit(keys[4], keys[4], sampleRecord('f'), 5000)).rejects.toThrow(
        'WRONGTYPE',
      );
    } finally {
      own.disconnect();
    }
  });

  it('carries at most 64 claims and 32 commits per command, and commits a record over 64 KiB alone', async () => {
    server.cli('CONFIG', 'RESETSTAT');
    const keys = Array.from({ length: 130 }, (_, i) => `idem:many-${i}`);
    const outcomes = await Promise.all(keys.map((key) => cache.claim(key, { owner: key, fingerprint: 'f', leaseMs: 5000 })));
    expect(outcomes.every((o) => o.state === 'claimed')).toBe(true);
    expect(server.commandStats().evalsha).toBe(3);
    server.cli('CONFIG', 'RESETSTAT');
    expect(
      (await Promise.all(keys.slice(0, 70).map((key) => cache.commit(key, key, sampleRecord('f'), 5000)))).every(Boolean),
    ).toBe(true);
    expect(server.commandStats().evalsha).toBe(3);
    server.cli('CONFIG', 'RESETSTAT');
    const big = { ...sampleRecord('f'), response: { ...sampleRecord('f').response, body: Buffer.alloc(64 * 1024 + 1, 'x') } };
    const committed = await Promise.all([
      cache.commit(keys[100], keys[100], big, 5000),
      cache.commit(keys[101], keys[101], sampleRecord('f'), 5000),
      cache.commit(keys[102], keys[102], sampleRecord('f'), 5000),
    ]);
    expect(committed).toEqual([true, true, true]);
    expect(server.commandStats().evalsha).toBe(2);
    // A record of exactly 64 KiB as stored still goes with the others.
    const head = encodeRecord(sampleRecord('f')).length - sampleRecord('f').response.body.length;
    const exact = {
      ...sampleRecord('f'),
      response: { ...sampleRecord('f').response, body: Buffer.alloc(64 * 1024 - head, 'x') },
    };
    expect(encodeRecord(exact).length).toBe(64 * 1024);
    server.cli('CONFIG', 'RESETSTAT');
    expect(
      await Promise.all(
        [keys[103], keys[104]].map((key, i) => cache.commit(key, key, i === 0 ? exact : sampleRecord('f'), 5000)),
      ),
    ).toEqual([true, true]);
    expect(server.commandStats().evalsha).toBe(1);
    const replay = await cache.claim(keys[100], { owner: 'x', fingerprint: 'f', leaseMs: 5000 });
    expect(replay.state === 'completed' && replay.record.response.body.length).toBe(64 * 1024 + 1);
  });

  it("keeps the client's keyPrefix for every key of a batch", async () => {
    const prefixed = new RedisStore({ url: server.url, redisOptions: { keyPrefix: 'pfx:' } });
    try {
      const outcomes = await Promise.all(
        ['a', 'b', 'c'].map((k) => prefixed.claim(`idem:${k}`, { owner: k, fingerprint: 'f', leaseMs: 5000 })),
      );
      expect(outcomes.map((o) => o.state)).toEqual(['claimed', 'claimed', 'claimed']);
      expect(await Promise.all(['a', 'b'].map((k) => prefixed.commit(`idem:${k}`, k, sampleRecord('f'), 5000)))).toEqual([
        true,
        true,
      ]);
      expect(server.cli('EXISTS', 'pfx:idem:a', 'pfx:idem:b', 'pfx:idem:c', 'idem:a').trim()).toBe('3');
      expect(server.cli('GET', 'pfx:idem:c').trim()).toBe('Cc\nf');
    } finally {
      await prefixed.close();
    }
  });

  it('sends the commands of one event-loop turn in one socket write on its own client, not on a client passed in', async () => {
    /** Calls into the socket's write path (one write system call each) while `work` runs. */
    const socketWrites = async (store: RedisStore, work: () => Promise<unknown>) => {
      const { stream } = await (store as unknown as { client: Promise<{ stream: Record<string, (...a: unknown[]) => void> }> })
        .client;
      let calls = 0;
      const original = { _write: stream._write, _writev: stream._writev };
      for (const name of ['_write', '_writev'] as const) {
        stream[name] = function (this: unknown, ...args: unknown[]) {
          calls++;
          return original[name].apply(this, args);
        };
      }
      await work();
      Object.assign(stream, original);
      return calls;
    };
    const keys = (tag: string) => Array.from({ length: 20 }, (_, i) => `idem:${tag}-${i}`);
    /** Per turn: 20 claims at once, then 20 releases at once, twice (each release is a command of its own). */
    const rounds = async (store: RedisStore, tag: string) => {
      await store.claim(`idem:${tag}-warm`, { owner: 'o', fingerprint: 'f', leaseMs: 1000 });
      const writes: number[] = [];
      for (const round of ['a', 'b']) {
        const claimed = keys(`${tag}-${round}`);
        let outcomes: unknown[] = [];
        writes.push(
          await socketWrites(store, async () => {
            outcomes = await Promise.all(claimed.map((k) => store.claim(k, { owner: 'o', fingerprint: 'f', leaseMs: 1000 })));
          }),
        );
        expect(outcomes).toEqual(Array(20).fill({ state: 'claimed' }));
        writes.push(
          await socketWrites(store, async () => {
            outcomes = await Promise.all(claimed.map((k) => store.release(k, 'o')));
          }),
        );
        expect(outcomes).toEqual(Array(20).fill(true));
      }
      return writes;
    };
    expect(await rounds(cache, 'batched')).toEqual([1, 1, 1, 1]);
    const own = new Redis(server.url);
    const shared = new RedisStore({ client: own });
    expect((await rounds(shared, 'unbatched')).every((n) => n > 1)).toBe(true);
    own.disconnect();
    // Asked before its client is connected: no socket to hold yet, and the command still goes.
    const fresh = new RedisStore({ url: server.url });
    expect(await fresh.release('idem:fresh', 'o')).toBe(false);
    await fresh.close();
  });

  it('sends the claims and commits asked for before close() ahead of its QUIT', async () => {
    const closing = new RedisStore({ url: server.url });
    await closing.claim('idem:closing', { owner: 'o', fingerprint: 'f', leaseMs: 5000 });
    const committed = closing.commit('idem:closing', 'o', sampleRecord('f'), 5000);
    const claimed = closing.claim('idem:closing-2', { owner: 'o', fingerprint: 'f', leaseMs: 5000 });
    await closing.close();
    expect(await committed).toBe(true);
    expect(await claimed).toEqual({ state: 'claimed' });
    expect(server.cli('GET', 'idem:closing-2').trim()).toBe('Co\nf');
  });

  it('closes only the clients it created', async () => {
    const own = new Redis(server.url);
    const shared = new RedisStore({ client: own });
    await shared.claim('idem:shared', { owner: 'o', fingerprint: 'f', leaseMs: 1000 });
    await shared.close();
    expect(await own.ping()).toBe('PONG');
    own.disconnect();
    const created = new RedisStore({ url: server.url });
    await created.claim('idem:created', { owner: 'o', fingerprint: 'f', leaseMs: 1000 });
    const clientsBefore = Number(/connected_clients:(\d+)/.exec(server.cli('INFO', 'clients'))![1]);
    await created.close();
    await sleep(100);
    const clientsAfter = Number(/connected_clients:(\d+)/.exec(server.cli('INFO', 'clients'))![1]);
    expect(clientsAfter).toBe(clientsBefore - 1);
  });

  it('validates its options with the shared validators: exactly one of url and client, an integer timeout, no unknown key', () => {
    expect(() => new RedisStore(undefined as never)).toThrow('RedisStore: options must be an object');
    expect(() => new RedisStore({})).toThrow('RedisStore: give exactly one of url (a client of its own) and client (yours)');
    expect(() => new RedisStore({ url: '' })).toThrow('RedisStore: give exactly one of url');
    expect(() => new RedisStore({ url: server.url, client: {} as never })).toThrow('RedisStore: give exactly one of url');
    expect(() => new RedisStore({ url: server.url, commandTimeout: 5 } as never)).toThrow('did you mean commandTimeoutMs?');
    for (const bad of [0, -1, 1.5, Number.NaN, 2 ** 31]) {
      expect(() => new RedisStore({ url: server.url, commandTimeoutMs: bad })).toThrow(
        `RedisStore: commandTimeoutMs must be an integer from 1 to 2147483647, got ${bad}`,
      );
    }
    const longest = new RedisStore({ url: server.url, commandTimeoutMs: 2 ** 31 - 1 });
    const accepted = new RedisStore({ url: server.url, commandTimeoutMs: 1 });
    return Promise.all([longest.close(), accepted.close()]);
  });

  it('still takes the deprecated RedisCacheOptions builder and the RedisCache name: the same store, one warning each', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const old = new RedisCache(RedisCacheOptions.create().withUrl(server.url).withCommandTimeout(500));
    const again = new RedisCache(RedisCacheOptions.create().withUrl(server.url));
    expect(old).toBeInstanceOf(RedisStore);
    const current = new RedisStore({ url: server.url });
    expect(current).toBeInstanceOf(RedisCache);
    expect(RedisCache.prototype).toBe(RedisStore.prototype);
    const warnings = warn.mock.calls.map((c) => String(c[0]));
    expect(warnings.filter((w) => w.startsWith('RedisCache is deprecated'))).toHaveLength(1);
    expect(warnings.filter((w) => w.startsWith('RedisCacheOptions is deprecated'))).toHaveLength(1);
    await old.claim('idem:old-name', { owner: 'o', fingerprint: 'f', leaseMs: 5000 });
    expect((await again.claim('idem:old-name', { owner: 'p', fingerprint: 'f', leaseMs: 5000 })).state).toBe('in-flight');
    await Promise.all([old.close(), again.close(), current.close()]);
    warn.mockRestore();
  });

  it('bounds every command by the command timeout', async () => {
    const slow = new RedisStore({ url: server.url, commandTimeoutMs: 100 });
    try {
      await slow.claim('idem:warm-slow', { owner: 'o', fingerprint: 'f', leaseMs: 1000 });
      // Paused far longer than the bound: a command that is not bounded would succeed after the pause.
      server.cli('CLIENT', 'PAUSE', '5000', 'ALL');
      await expect(slow.claim('idem:slow', { owner: 'o', fingerprint: 'f', leaseMs: 1000 })).rejects.toThrow(
        'Redis command timed out after 100 ms',
      );
      for (const op of [
        () => slow.commit('idem:slow', 'o', sampleRecord('f'), 1000),
        () => slow.release('idem:slow', 'o'),
        () => slow.renew('idem:slow', 'o', 1000),
      ]) {
        await expect(op()).rejects.toThrow('Redis command timed out after 100 ms');
      }
    } finally {
      server.cli('CLIENT', 'UNPAUSE');
      await slow.close();
    }
  });
});

/** The ioredis client inside a store, for checks of how the store set it up. */
const clientOf = (cache: RedisStore) => (cache as unknown as { client: Promise<Redis> }).client;

// A server of this describe's own: its tests stop and restart it.
describeRedis('RedisStore client set-up, outages and shutdown', () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await RedisServer.start([], { ownServer: true });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('fails commands after one reconnect attempt and backs off 100 ms per attempt up to 1 s', async () => {
    const cache = new RedisStore({ url: server.url });
    const client = await clientOf(cache);
    expect(client.options.maxRetriesPerRequest).toBe(1);
    expect([1, 3, 10, 50].map((n) => client.options.retryStrategy!(n))).toEqual([100, 300, 1000, 1000]);
    await cache.close();
  });

  it('lets withRedisOptions() override and extend the client options', async () => {
    const cache = new RedisStore({ url: server.url, redisOptions: { maxRetriesPerRequest: 0, db: 2 } });
    const client = await clientOf(cache);
    expect(client.options.maxRetriesPerRequest).toBe(0);
    expect(client.options.db).toBe(2);
    await cache.claim('idem:db2', { owner: 'o', fingerprint: 'f', leaseMs: 5000 });
    expect(server.cli('-n', '2', 'EXISTS', 'idem:db2').trim()).toBe('1');
    await cache.close();
  });

  it('a client that cannot be created fails every command, and close() still succeeds', async () => {
    // ioredis builds `new options.Connector(...)` in its constructor: a non-constructor makes it throw.
    const cache = new RedisStore({ url: server.url, redisOptions: { Connector: 42 } });
    await expect(cache.claim('idem:none', { owner: 'o', fingerprint: 'f', leaseMs: 5000 })).rejects.toThrow(TypeError);
    await expect(cache.close()).resolves.toBeUndefined();
  });

  it('clears the timer of every command once it settles', async () => {
    const cache = new RedisStore({ url: server.url, commandTimeoutMs: 4321 });
    await cache.claim('idem:t0', { owner: 'o', fingerprint: 'f', leaseMs: 5000 });
    const started = jest.spyOn(globalThis, 'setTimeout');
    const cleared = jest.spyOn(globalThis, 'clearTimeout');
    try {
      await cache.claim('idem:t1', { owner: 'o', fingerprint: 'f', leaseMs: 5000 });
      await cache.commit('idem:t1', 'o', sampleRecord('f'), 5000);
      await cache.claim('idem:t2', { owner: 'o', fingerprint: 'f', leaseMs: 5000 });
      await cache.renew('idem:t2', 'o', 5000);
      await cache.release('idem:t2', 'o');
      // The store's own timers are the ones armed with its command timeout.
      const bounds = started.mock.results.filter((_, i) => started.mock.calls[i][1] === 4321).map((r) => r.value);
      expect(bounds).toHaveLength(5);
      const clearedTimers = new Set(cleared.mock.calls.map(([t]) => t));
      expect(bounds.every((t) => clearedTimers.has(t as NodeJS.Timeout))).toBe(true);
    } finally {
      started.mockRestore();
      cleared.mockRestore();
      await cache.close();
    }
  });

  it('close() while Redis is down stops its client from reconnecting (a pod can shut down)', async () => {
    const cache = new RedisStore({ url: server.url });
    const client = await clientOf(cache);
    await cache.claim('idem:x', { owner: 'o', fingerprint: 'f', leaseMs: 5000 });
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      await server.stop();
      await sleep(200);
      await cache.close();
      await server.resume();
      await sleep(1500); // longer than the longest reconnect back-off
      expect(client.status).not.toBe('ready');
      expect(server.cli('INFO', 'clients')).toMatch(/connected_clients:1\r?\n/); // redis-cli alone
    } finally {
      errors.mockRestore();
    }
  });

  it('logs the outage once, fails commands fast, and logs the recovery', async () => {
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const logs = jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
    const cache = new RedisStore({ url: server.url });
    try {
      await cache.claim('idem:a', { owner: 'o', fingerprint: 'f', leaseMs: 5000 });
      expect(errors).not.toHaveBeenCalled();
      await server.stop();
      await expect(cache.claim('idem:b', { owner: 'o', fingerprint: 'f', leaseMs: 5000 })).rejects.toThrow();
      await sleep(700); // several reconnect attempts
      expect((errors.mock.contexts[0] as { context?: string }).context).toBe('RedisStore');
      expect(errors.mock.calls.filter(([m]) => String(m).startsWith('Redis unreachable: '))).toEqual([
        [`Redis unreachable: connect ECONNREFUSED 127.0.0.1:${server.port}`],
      ]);
      expect(logs).not.toHaveBeenCalledWith('Redis reachable again');
      await server.resume();
      let outcome;
      for (let i = 0; i < 50 && !outcome; i++) {
        outcome = await cache.claim('idem:c', { owner: 'o', fingerprint: 'f', leaseMs: 5000 }).catch(() => undefined);
        if (!outcome) await sleep(100);
      }
      expect(outcome).toEqual({ state: 'claimed' });
      expect(logs).toHaveBeenCalledWith('Redis reachable again');
      expect(logs).toHaveBeenCalledTimes(1);
    } finally {
      await cache.close();
      jest.restoreAllMocks();
    }
  });
});

describeRedis('RedisStore with an existing client', () => {
  let server: RedisServer;
  let client: Redis;
  beforeAll(async () => {
    server = await RedisServer.start();
  });
  afterAll(async () => {
    client?.disconnect();
    await server?.stop();
  });
  storeContract(
    'RedisStore (withClient)',
    async () => {
      client = new Redis(server.url);
      return new RedisStore({ client });
    },
    // Its subscriber (the announce test listens) is the store's own, whoever owns the client.
    (store) => store.close!(),
  );
  const fives: Redis5[] = [];
  afterAll(() => fives.forEach((c) => c.disconnect()));
  storeContract(
    'RedisStore (withClient, ioredis 5)',
    async () => {
      const five = new Redis5(server.url);
      fives.push(five);
      return new RedisStore({ client: five });
    },
    (store) => store.close!(),
  );

  const claim = (owner: string, fingerprint = 'f') => ({ owner, fingerprint, leaseMs: 5000 });
  const FOREIGN = 'a value the idempotency layer did not write was under an idempotency key; it is replaced by a claim';

  it('peek reads a hand-written value without an expiry as never expiring', async () => {
    server.cli('SET', 'idem:forever', 'Chand\nf');
    expect(await new RedisStore({ client }).peek('idem:forever')).toMatchObject({ state: 'in-flight', expiresAt: Infinity });
  });

  it('takes over a key of another type, a foreign string and a damaged value, each with one warning', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const cache = new RedisStore({ client });
    server.cli('HSET', 'idem:foreign-hash', 'a', '1');
    expect(await cache.claim('idem:foreign-hash', claim('o'))).toEqual({ state: 'claimed' });
    expect(server.cli('TYPE', 'idem:foreign-hash').trim()).toBe('string');
    expect(Number(server.cli('PTTL', 'idem:foreign-hash'))).toBeGreaterThan(4000);
    expect(await cache.commit('idem:foreign-hash', 'o', sampleRecord('f'), 1000)).toBe(true);
    for (const value of ['hello', 'Rbroken\n', 'C']) {
      server.cli('SET', 'idem:foreign-string', value);
      expect(await cache.claim('idem:foreign-string', claim('o'))).toEqual({ state: 'claimed' });
      expect(Number(server.cli('PTTL', 'idem:foreign-string'))).toBeGreaterThan(4000);
      expect(await cache.claim('idem:foreign-string', claim('x', 'g'))).toEqual({ state: 'in-flight', fingerprint: 'f' });
      server.cli('DEL', 'idem:foreign-string');
    }
    expect(warn.mock.calls).toEqual([[FOREIGN], [FOREIGN], [FOREIGN], [FOREIGN]]);
    expect((warn.mock.contexts[0] as { context?: string }).context).toBe('RedisStore');
    warn.mockRestore();
  });

  it('replaces a damaged value only if it is unchanged since it was read', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const racing = new Redis(server.url);
    const cache = new RedisStore({ client: racing });
    const scripted = racing as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const takeOver = scripted.nestjsIdempotencyTakeOverBuffer.bind(racing);
    let meanwhile: string[] = [];
    scripted.nestjsIdempotencyTakeOverBuffer = (...args: unknown[]) => {
      server.cli(...meanwhile);
      return takeOver(...args);
    };
    try {
      // Another pod claimed it in between: its claim is what the caller sees.
      server.cli('SET', 'idem:race', 'junk');
      meanwhile = ['SET', 'idem:race', 'Cother\ng'];
      expect(await cache.claim('idem:race', claim('o'))).toEqual({ state: 'in-flight', fingerprint: 'g' });
      // Gone in between: free, so claimed.
      server.cli('SET', 'idem:race', 'junk');
      meanwhile = ['DEL', 'idem:race'];
      expect(await cache.claim('idem:race', claim('o'))).toEqual({ state: 'claimed' });
      expect(await cache.claim('idem:race', claim('x', 'g'))).toEqual({ state: 'in-flight', fingerprint: 'f' });
      // Replaced by other junk in between: not taken, the request fails (503 upstream) rather than loop.
      server.cli('SET', 'idem:race', 'junk');
      meanwhile = ['SET', 'idem:race', 'other junk'];
      await expect(cache.claim('idem:race', claim('o'))).rejects.toThrow(
        'RedisStore: the key holds a value that is not an idempotency record',
      );
      expect(server.cli('GET', 'idem:race').trim()).toBe('other junk');
    } finally {
      racing.disconnect();
      warn.mockRestore();
    }
  });
});

describeCluster('RedisStore on a 3-master Redis Cluster', () => {
  let cluster: RedisCluster;
  let client: Cluster;
  beforeAll(async () => {
    cluster = await RedisCluster.start();
  }, 60_000);
  afterAll(async () => {
    client?.disconnect();
    await cluster?.stop();
  });
  storeContract(
    'RedisStore (Cluster client)',
    async () => {
      client = new Cluster(cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })));
      return new RedisStore({ client });
    },
    (store) => store.close!(),
    async (_, key, value, ttlMs) => void (await client.set(key, value, 'PX', ttlMs)),
  );

  const fives: Cluster5[] = [];
  afterAll(() => fives.forEach((c) => c.disconnect()));
  storeContract(
    'RedisStore (Cluster client, ioredis 5)',
    async () => {
      const five = new Cluster5(cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })));
      fives.push(five);
      return new RedisStore({ client: five });
    },
    (store) => store.close!(),
  );

  it('spreads keys over the masters', async () => {
    const cache = new RedisStore({ client });
    for (let i = 0; i < 30; i++) await cache.claim(`idem:spread:${i}`, { owner: 'o', fingerprint: 'f', leaseMs: 5000 });
    const perNode = cluster.nodes.map((n) => Number(n.cli('DBSIZE').trim()));
    expect(perNode.filter((n) => n > 0).length).toBe(3);
  });
});
