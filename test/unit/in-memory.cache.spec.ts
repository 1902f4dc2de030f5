import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import type { IdempotencyRecord } from '../../lib/stores/index.js';
import { InMemoryCache } from '../../lib/compat/index.js';
import { InMemoryStore } from '../../lib/index.js';

const record = (fingerprint = 'fp'): IdempotencyRecord => ({
  fingerprint,
  response: { status: 201, headers: { 'content-type': 'application/json' }, body: Buffer.from('{}') },
});
const claim = (owner = 'o1', fingerprint = 'fp', leaseMs = 1000) => ({ owner, fingerprint, leaseMs });

describe('InMemoryStore as an idempotency store', () => {
  it('claims a free key once; a second claim sees it in flight, then completed', async () => {
    const c = new InMemoryStore();
    expect(await c.claim('k', claim('a'))).toEqual({ state: 'claimed' });
    expect(await c.claim('k', claim('b', 'fp2'))).toEqual({ state: 'in-flight', fingerprint: 'fp' });
    expect(await c.commit('k', 'a', record(), 1000)).toBe(true);
    expect(await c.claim('k', claim('b'))).toEqual({ state: 'completed', record: record() });
  });

  it("commit, release and renew act only on the caller's own claim (fencing)", async () => {
    let now = 0;
    const c = new InMemoryStore({ now: () => now });
    await c.claim('k', claim('slow', 'fp', 100));
    now = 100; // the slow owner's lease ran out
    expect(await c.claim('k', claim('fast', 'fp', 100))).toEqual({ state: 'claimed' });
    expect(await c.commit('k', 'slow', record('stale'), 1000)).toBe(false);
    expect(await c.release('k', 'slow')).toBe(false);
    expect(await c.renew('k', 'slow', 100)).toBe(false);
    expect(await c.commit('k', 'fast', record('fresh'), 1000)).toBe(true);
    expect(await c.release('k', 'fast')).toBe(false); // a record is not a claim
    expect(await c.claim('k', claim('x'))).toMatchObject({ state: 'completed', record: { fingerprint: 'fresh' } });
  });

  it("a lapsed claim nobody took is still its owner's: renewed, then released or committed", async () => {
    let now = 0;
    const c = new InMemoryStore({ now: () => now });
    await c.claim('k', claim('late', 'fp', 100));
    now = 150;
    expect(await c.renew('k', 'late', 100)).toBe(true);
    expect(await c.claim('k', claim('b'))).toEqual({ state: 'in-flight', fingerprint: 'fp' });
    now = 300;
    expect(await c.release('k', 'late')).toBe(true);
    expect(await c.claim('k', claim('b', 'fp', 100))).toEqual({ state: 'claimed' });
    now = 500;
    expect(await c.commit('k', 'b', record('late'), 1000)).toBe(true);
    expect(await c.claim('k', claim('x'))).toMatchObject({ state: 'completed', record: { fingerprint: 'late' } });
  });

  it('a lease expires unless renewed; a record lives ttlMs to the millisecond', async () => {
    let now = 0;
    const c = new InMemoryStore({ now: () => now });
    await c.claim('k', claim('a', 'fp', 100));
    now = 90;
    expect(await c.renew('k', 'a', 100)).toBe(true);
    now = 189;
    expect(await c.claim('k', claim('b'))).toMatchObject({ state: 'in-flight' });
    now = 190;
    expect(await c.claim('k', claim('b', 'fp', 100))).toEqual({ state: 'claimed' });
    expect(await c.commit('k', 'b', record(), 500)).toBe(true);
    now = 689;
    expect((await c.claim('k', claim('c'))).state).toBe('completed');
    now = 690;
    expect((await c.claim('k', claim('c'))).state).toBe('claimed');
  });

  it('release frees the key', async () => {
    const c = new InMemoryStore();
    await c.claim('k', claim('a'));
    expect(await c.release('k', 'a')).toBe(true);
    expect(c.size).toBe(0);
    expect(await c.claim('k', claim('b'))).toEqual({ state: 'claimed' });
  });

  it('a claim and the record that replaces it are one entry', async () => {
    const c = new InMemoryStore({ maxEntries: 2 });
    await c.claim('a', claim('o'));
    await c.commit('a', 'o', record(), 1000);
    expect(c.size).toBe(1);
    await c.claim('b', claim('o'));
    expect(c.size).toBe(2);
    expect(await c.claim('a', claim('z'))).toMatchObject({ state: 'completed' });
  });
});

describe("InMemoryStore's claims: decided when asked, answered with the turn's others", () => {
  afterEach(() => {
    jest.useRealTimers();
  });

  it('answers the claims of one turn together, in its check phase, decided in the order asked', async () => {
    const c = new InMemoryStore();
    const answered: string[] = [];
    const first = c.claim('k', claim('a')).then((o) => void answered.push(`a ${o.state}`));
    const second = c.claim('k', claim('b')).then((o) => void answered.push(`b ${o.state}`));
    // Promise jobs alone do not answer them: the turn's check phase does.
    for (let i = 0; i < 10; i++) await Promise.resolve();
    expect(answered).toEqual([]);
    // Decided already: a commit in the same turn finds the first caller's claim.
    expect(await c.peek('k')).toMatchObject({ state: 'in-flight' });
    await Promise.all([first, second]);
    expect(answered).toEqual(['a claimed', 'b in-flight']);
    // The next turn's claims are answered in their own turn.
    expect(await c.claim('j', claim('a'))).toEqual({ state: 'claimed' });
  });

  it("answers under a test's fake timers, which cannot hold its answers back", async () => {
    jest.useFakeTimers();
    const c = new InMemoryStore();
    expect(await c.claim('k', claim('a'))).toEqual({ state: 'claimed' });
    expect(await c.claim('k', claim('b'))).toMatchObject({ state: 'in-flight' });
  });

  it('a claim the store has no room for is refused at once, without waiting for the turn', async () => {
    const c = new InMemoryStore({ maxEntries: 1 });
    await c.claim('a', claim('o'));
    let refused: unknown;
    const asked = c.claim('b', claim('o')).catch((err: unknown) => (refused = err));
    await Promise.resolve();
    await Promise.resolve();
    expect(String(refused)).toContain('InMemoryStore is full');
    await asked;
  });
});

describe("InMemoryStore's admin operations and eviction reports", () => {
  it('peek() and forget() see only the idempotency entries: a plain value is neither shown nor removed', async () => {
    const c = new InMemoryStore();
    c.set('plain', 1);
    expect(await c.peek('plain')).toBeUndefined();
    expect(await c.forget('plain')).toBe(false);
    expect(c.get('plain')).toBe(1);
    expect(await c.forget('missing')).toBe(false);
    await c.claim('k', claim('a'));
    expect(await c.forget('k')).toBe(true);
    expect(await c.peek('k')).toBeUndefined();
  });

  it('reports the records evicted to make room, not the plain values', async () => {
    const c = new InMemoryStore({ maxEntries: 2 });
    const evicted: string[] = [];
    c.watchEvictions((key) => evicted.push(key));
    c.set('plain', 1);
    await c.claim('r', claim('a'));
    await c.commit('r', 'a', record(), 60_000);
    await c.claim('s', claim('a')); // the plain value goes first
    expect(evicted).toEqual([]);
    await c.commit('s', 'a', record(), 60_000);
    await c.claim('t', claim('a')); // then the oldest record
    expect(evicted).toEqual(['r']);
  });
});

describe('InMemoryStore eviction', () => {
  it('is bounded by maxEntries under a flood and evicts the oldest unread entry first', () => {
    const c = new InMemoryStore({ maxEntries: 100 });
    for (let i = 0; i < 1000; i++) c.set(`k${i}`, i);
    expect(c.size).toBe(100);
    expect(c.get('k899')).toBeUndefined();
    expect(c.get('k900')).toBe(900);
    expect(c.get('k999')).toBe(999);
  });

  it('plain entries go before guaranteed ones, however recent', async () => {
    const c = new InMemoryStore({ maxEntries: 10 });
    for (let i = 0; i < 5; i++) {
      await c.claim(`idem:${i}`, claim(`o${i}`));
      await c.commit(`idem:${i}`, `o${i}`, record(), 10_000);
    }
    for (let i = 0; i < 100; i++) c.set(`plain:${i}`, i);
    expect(c.size).toBe(10);
    for (let i = 0; i < 5; i++) expect((await c.claim(`idem:${i}`, claim('x'))).state).toBe('completed');
  });

  it('only a read marks an entry as used: setIfAbsent and commit do not', async () => {
    const c = new InMemoryStore({ maxEntries: 3 });
    c.set('a', 1);
    c.set('b', 2);
    c.set('c', 3);
    expect(c.get('a')).toBe(1); // a is now the most recently used
    expect(c.setIfAbsent('b', 20)).toBe(false); // touches nothing
    c.set('d', 4); // evicts b: the oldest never-read entry
    expect(c.get('b')).toBeUndefined();
    expect(c.get('a')).toBe(1);
    c.set('e', 5); // evicts c
    expect(c.get('c')).toBeUndefined();
    expect(c.get('d')).toBe(4);
  });

  it('a claimed key nobody asked for again falls first; a replayed one is kept', async () => {
    const c = new InMemoryStore({ maxEntries: 3 });
    for (const k of ['x', 'y', 'z']) {
      await c.claim(k, claim(k));
      await c.commit(k, k, record(), 10_000);
    }
    await c.claim('x', claim('again')); // a replay reads x
    await c.claim('w', claim('w'));
    expect(c.size).toBe(3);
    expect((await c.claim('y', claim('n'))).state).toBe('claimed'); // y was evicted (oldest unread)
    expect((await c.claim('x', claim('n'))).state).toBe('completed');
  });

  it('prefixQuotas protect a prefix at or under its quota from other prefixes', () => {
    const c = new InMemoryStore({ maxEntries: 10, prefixQuotas: { 'idem:': 6, 'rl:': 4 } });
    for (let i = 0; i < 6; i++) c.set(`idem:${i}`, i, { guaranteed: true });
    for (let i = 0; i < 100; i++) c.set(`rl:${i}`, i, { guaranteed: true });
    for (let i = 0; i < 6; i++) expect(c.get(`idem:${i}`)).toBe(i);
    expect(c.size).toBe(10);
    // Its own prefix still evicts within itself.
    c.set('idem:new', 'n', { guaranteed: true });
    expect(c.get('idem:new')).toBe('n');
    expect(c.get('idem:0')).toBeUndefined();
  });

  it('a prefix over its quota can be evicted by others', () => {
    const c = new InMemoryStore({ maxEntries: 10, prefixQuotas: { 'idem:': 4 } });
    for (let i = 0; i < 10; i++) c.set(`idem:${i}`, i, { guaranteed: true });
    for (let i = 0; i < 20; i++) c.set(`other:${i}`, i, { guaranteed: true });
    let idem = 0;
    for (let i = 0; i < 10; i++) if (c.get(`idem:${i}`) !== undefined) idem++;
    expect(idem).toBe(4);
  });

  it('refuses an insert rather than break the bound or a quota', async () => {
    const c = new InMemoryStore({ maxEntries: 2, prefixQuotas: { 'a:': 1, 'b:': 1 } });
    c.set('a:1', 1);
    c.set('b:1', 1);
    expect(c.set('c:1', 1)).toBe(false);
    expect(c.size).toBe(2);
    await expect(c.claim('c:2', claim())).rejects.toThrow(
      'InMemoryStore is full: every entry is a claim in flight or kept by its prefix quota',
    );
  });

  it('never evicts a claim in flight: a full cache refuses the next claim instead', async () => {
    let now = 0;
    const c = new InMemoryStore({ maxEntries: 2, now: () => now });
    expect(await c.claim('a', claim('o', 'fp', 100))).toEqual({ state: 'claimed' });
    c.set('plain', 1);
    expect(await c.claim('b', claim('o', 'fp', 100))).toEqual({ state: 'claimed' }); // evicts the plain entry
    expect(c.get('plain')).toBeUndefined();
    await expect(c.claim('c', claim('o', 'fp', 100))).rejects.toThrow('InMemoryStore is full');
    expect(c.set('plain', 1)).toBe(false);
    expect(await c.claim('a', claim('x', 'fp', 100))).toEqual({ state: 'in-flight', fingerprint: 'fp' });
    // A committed claim is a record, evictable as any other.
    expect(await c.commit('a', 'o', record(), 1000)).toBe(true);
    expect(await c.claim('c', claim('o', 'fp', 100))).toEqual({ state: 'claimed' });
    expect([...c.keys()].sort()).toEqual(['b', 'c']);
    await expect(c.claim('d', claim('o'))).rejects.toThrow('InMemoryStore is full');
    // A claim whose lease ran out is dead: it makes room.
    now = 100;
    expect(await c.claim('d', claim('o'))).toEqual({ state: 'claimed' });
    expect(c.size).toBe(2);
    expect(c.keys().next().value).toBe('c');
  });

  it('a record keeps the read mark its claim got, and goes after the unread records', async () => {
    const c = new InMemoryStore({ maxEntries: 2 });
    await c.claim('read', claim('o'));
    await c.claim('read', claim('dup'));
    await c.commit('read', 'o', record(), 1000);
    await c.claim('unread', claim('o'));
    await c.commit('unread', 'o', record(), 1000);
    await c.claim('new', claim('o'));
    expect([...c.keys()].sort()).toEqual(['new', 'read']);
  });

  it('validates its options', () => {
    expect(() => new InMemoryStore({ maxEntries: 0 })).toThrow('maxEntries must be a positive integer');
    expect(() => new InMemoryStore({ maxEntries: 5, prefixQuotas: { 'a:': 3, 'b:': 3 } })).toThrow('more than maxEntries');
    expect(() => new InMemoryStore({ prefixQuotas: { '': 1 } })).toThrow('non-empty prefixes');
  });

  it('expires plain entries lazily', () => {
    let now = 0;
    const c = new InMemoryStore({ now: () => now });
    c.set('a', 1, { ttlMs: 10 });
    expect(c.setIfAbsent('a', 2)).toBe(false);
    now = 10;
    expect(c.get('a')).toBeUndefined();
    expect(c.setIfAbsent('a', 3)).toBe(true);
    expect(c.delete('a')).toBe(true);
    expect(c.delete('a')).toBe(false);
  });
});

describe('InMemoryStore bookkeeping', () => {
  it('a deleted entry leaves the eviction order intact', () => {
    const c = new InMemoryStore({ maxEntries: 3 });
    c.set('a', 1);
    c.set('b', 2);
    c.set('c', 3);
    c.delete('b');
    c.set('d', 4);
    c.set('e', 5); // evicts a
    c.set('f', 6); // evicts c
    expect([...c.keys()].sort()).toEqual(['d', 'e', 'f']);
    expect(c.size).toBe(3);
  });

  it('overwriting a value keeps one entry', () => {
    const c = new InMemoryStore({ maxEntries: 2 });
    c.set('a', 1);
    expect(c.set('a', 2)).toBe(true);
    c.set('b', 3);
    expect(c.get('a')).toBe(2);
    expect(c.get('b')).toBe(3);
    c.set('c', 4);
    expect(c.size).toBe(2);
  });

  it('set() can give an existing entry a guarantee, and take it away', () => {
    const c = new InMemoryStore({ maxEntries: 3 });
    c.set('kept', 1);
    c.set('kept', 2, { guaranteed: true });
    c.set('dropped', 1, { guaranteed: true });
    c.set('dropped', 2);
    for (let i = 0; i < 10; i++) c.set(`plain:${i}`, i);
    expect(c.get('kept')).toBe(2);
    expect(c.get('dropped')).toBeUndefined();
  });

  it('an entry without ttl never expires', () => {
    let now = 0;
    const c = new InMemoryStore({ now: () => now });
    c.set('forever', 1);
    now = Number.MAX_SAFE_INTEGER;
    expect(c.get('forever')).toBe(1);
  });

  it('a plain value under a key is foreign to the idempotency operations, and a claim replaces it', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const c = new InMemoryStore();
    c.set('k', { owner: 'o' });
    expect(await c.commit('k', 'o', record(), 1000)).toBe(false);
    expect(await c.release('k', 'o')).toBe(false);
    expect(await c.renew('k', 'o', 1000)).toBe(false);
    expect(c.get('k')).toEqual({ owner: 'o' });
    expect(await c.claim('k', claim('o'))).toEqual({ state: 'claimed' });
    expect(warn).toHaveBeenCalledWith(
      'a value the idempotency layer did not write was under an idempotency key; it is replaced by a claim',
    );
    expect(c.size).toBe(1);
    warn.mockRestore();
    c.set('k', { owner: 'o' });
    expect(await c.release('k', 'o')).toBe(false);
    expect(await c.renew('k', 'o', 1000)).toBe(false);
    expect(await c.commit('missing', 'o', record(), 1000)).toBe(false);
  });

  it('evicts the oldest entry across prefix groups', () => {
    const c = new InMemoryStore({ maxEntries: 4, prefixQuotas: { 'a:': 1, 'b:': 1 } });
    for (const k of ['b:1', 'a:1', 'b:2', 'a:2']) c.set(k, k);
    c.set('c:1', 'c');
    expect(c.get('b:1')).toBeUndefined();
    expect(c.get('a:1')).toBe('a:1');
  });

  it('keys without a quota prefix are never protected', () => {
    const c = new InMemoryStore({ maxEntries: 3, prefixQuotas: { 'q:': 1 } });
    c.set('x', 1);
    c.set('q:1', 1);
    c.set('q:2', 1);
    c.set('q:3', 1); // q: is over its quota and x has none: x, the oldest, goes
    expect(c.get('x')).toBeUndefined();
    expect(c.get('q:1')).toBe(1);
  });

  it('a key counts under its longest matching quota prefix', () => {
    const c = new InMemoryStore({ maxEntries: 2, prefixQuotas: { 'idem:': 1, 'idem:a:': 1 } });
    c.set('idem:a:1', 1);
    c.set('idem:2', 2);
    c.set('idem:a:3', 3); // only its own group may give way
    expect(c.get('idem:2')).toBe(2);
    expect(c.get('idem:a:1')).toBeUndefined();
    expect(c.get('idem:a:3')).toBe(3);
  });

  it('the longest prefix wins whatever order the quotas are listed in', () => {
    const c = new InMemoryStore({ maxEntries: 2, prefixQuotas: { 'idem:': 1, 'idem:a:': 1 } });
    c.set('idem:a:1', 1);
    c.set('idem:2', 2);
    // Each prefix holds exactly its quota, so neither may give way to an unprefixed key. Counted
    // under 'idem:' (the first listed), 'idem:a:1' would put that prefix over its quota.
    expect(c.set('x', 3)).toBe(false);
    expect(c.get('idem:a:1')).toBe(1);
    expect(c.get('idem:2')).toBe(2);
  });

  it('overwriting a value keeps its place in the eviction order', () => {
    const c = new InMemoryStore({ maxEntries: 3 });
    c.set('a', 1);
    c.set('b', 2);
    c.set('c', 3);
    c.set('a', 10);
    c.set('d', 4);
    expect(c.get('a')).toBeUndefined();
    expect(c.get('b')).toBe(2);
  });

  it('clear() empties the store', () => {
    const c = new InMemoryStore({ maxEntries: 2, prefixQuotas: { 'q:': 1 } });
    c.set('q:1', 1);
    c.set('x', 2);
    c.clear();
    expect(c.size).toBe(0);
    expect(c.get('q:1')).toBeUndefined();
    // The quota counts were reset too: both slots are free again.
    expect(c.set('q:2', 1)).toBe(true);
    expect(c.set('q:3', 1)).toBe(true);
    expect(c.set('y', 1)).toBe(true);
    expect(c.get('q:2')).toBeUndefined();
  });

  it('reads order entries by recency across groups', () => {
    const c = new InMemoryStore({ maxEntries: 4, prefixQuotas: { 'a:': 1, 'b:': 1 } });
    for (const k of ['a:1', 'b:1', 'a:2', 'b:2']) c.set(k, k);
    for (const k of ['a:1', 'b:1', 'a:2', 'b:2']) c.get(k);
    c.get('a:1'); // now b:1 is the least recently read
    c.set('c:1', 1);
    expect(c.get('b:1')).toBeUndefined();
    expect(c.get('a:1')).toBe('a:1');
  });

  it('accepts maxEntries 1 and refuses negative quotas', () => {
    const c = new InMemoryStore({ maxEntries: 1 });
    c.set('a', 1);
    c.set('b', 2);
    expect([...c.keys()]).toEqual(['b']);
    expect(() => new InMemoryStore({ prefixQuotas: { 'a:': -1 } })).toThrow('non-negative integer quotas');
    expect(new InMemoryStore({ maxEntries: 5, prefixQuotas: { 'a:': 0 } }).size).toBe(0);
  });
});

describe('InMemoryStore in production', () => {
  const env = process.env.NODE_ENV;
  afterEach(() => {
    process.env.NODE_ENV = env;
  });

  it('warns once that its state is per process', () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    process.env.NODE_ENV = 'production';
    new InMemoryStore();
    new InMemoryStore();
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0][0])).toContain('Use RedisStore');
    expect((warn.mock.contexts[0] as { context?: string }).context).toBe('InMemoryStore');
    warn.mockRestore();
  });
});

describe('InMemoryCache, the deprecated name of InMemoryStore', () => {
  afterEach(() => {
    jest.restoreAllMocks();
  });

  it('is the same class: new, instanceof, extends and statics reach InMemoryStore; the first new warns once', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const old = new InMemoryCache({ maxEntries: 5 });
    new InMemoryCache();
    expect(old).toBeInstanceOf(InMemoryStore);
    expect(new InMemoryStore()).toBeInstanceOf(InMemoryCache);
    expect(Object.getPrototypeOf(old)).toBe(InMemoryStore.prototype);
    expect(old.constructor).toBe(InMemoryStore);
    class Mine extends InMemoryCache {}
    expect(new Mine()).toBeInstanceOf(InMemoryStore);
    const renamed = warn.mock.calls.map((c) => String(c[0])).filter((m) => m.startsWith('InMemoryCache is deprecated'));
    expect(renamed).toEqual([
      "InMemoryCache is deprecated and will be removed in 1.0; use InMemoryStore, the same thing under the package's one word for a store",
    ]);
    expect(warn.mock.contexts.some((c) => (c as { context?: string }).context === 'Idempotency')).toBe(true);
    expect((await old.claim('k', claim())).state).toBe('claimed');
  });
});
