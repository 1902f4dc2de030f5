import { describe, expect, it } from '@jest/globals';
import type { IdempotencyClaim, IdempotencyRecord } from '../../lib/stores/index.js';
import { type IdempotencyStore, InMemoryStore } from '../../lib/index.js';
import { type ContractFramework, sampleRecord, storeContract, type StoreContractOptions } from '../../lib/testing/index.js';

/** Registers the shipped suite into a framework of our own, runs it, and names the tests that failed. */
async function failures(
  open: () => IdempotencyStore,
  options?: StoreContractOptions,
): Promise<{ suites: string[]; ran: string[]; failed: string[]; reasons: string[] }> {
  const suites: string[] = [];
  const tests: { name: string; body: () => Promise<void> }[] = [];
  const framework: ContractFramework = {
    describe: (name, body) => {
      suites.push(name);
      body();
    },
    it: (name, body) => tests.push({ name, body }),
  };
  storeContract(framework, open, options);
  const failed: string[] = [];
  const reasons: string[] = [];
  for (const test of tests) {
    await test.body().catch((err: Error) => {
      failed.push(test.name);
      reasons.push(err.message);
    });
  }
  return { suites, ran: tests.map((t) => t.name), failed, reasons };
}

/** A store that forgets who holds a claim: any caller's commit lands. The bug fencing exists for. */
class UnfencedStore implements IdempotencyStore {
  private readonly inner = new InMemoryStore();
  private readonly holders = new Map<string, string>();
  async claim(key: string, claim: IdempotencyClaim) {
    const outcome = await this.inner.claim(key, claim);
    if (outcome.state === 'claimed') this.holders.set(key, claim.owner);
    return outcome;
  }
  commit(key: string, owner: string, record: IdempotencyRecord, ttlMs: number) {
    return this.inner.commit(key, this.holders.get(key) ?? owner, record, ttlMs);
  }
  release(key: string, owner: string) {
    return this.inner.release(key, owner);
  }
  renew(key: string, owner: string, leaseMs: number) {
    return this.inner.renew(key, owner, leaseMs);
  }
}

/** Every method of `inner` with its key passed through `transform` first: a store that cuts, folds or re-encodes keys. */
function keyed(inner: InMemoryStore, transform: (key: string) => string): Partial<IdempotencyStore> {
  return {
    claim: (k, c) => inner.claim(transform(k), c),
    commit: (k, o, r, t) => inner.commit(transform(k), o, r, t),
    release: (k, o) => inner.release(transform(k), o),
    renew: (k, o, ms) => inner.renew(transform(k), o, ms),
    peek: (k) => inner.peek(transform(k)),
    forget: (k) => inner.forget(transform(k)),
    renewAll: (claims, ms) =>
      inner.renewAll(
        claims.map((c) => ({ ...c, key: transform(c.key) })),
        ms,
      ),
  };
}

describe('the shipped store contract (nestjs-idempotency/testing)', () => {
  it('given a second instance over the same backend, fails a store whose claim is atomic only inside one instance', async () => {
    const shared = new InMemoryStore();
    const name =
      'two instances over one backend: concurrent claims across them, exactly one wins; a commit on one replays on the other';
    const right = await failures(() => shared, { another: () => shared });
    expect(right.ran).toContain(name);
    expect(right.failed).toEqual([]);
    // Each instance its own state: what a store keeping its claims in process memory is across pods.
    const perProcess = await failures(() => new InMemoryStore(), { another: () => new InMemoryStore() });
    expect(perProcess.failed).toEqual([name]);
    expect((await failures(() => new InMemoryStore())).ran).not.toContain(name);
  }, 60_000);

  it('passes a correct store, and closes it in its last test', async () => {
    let closed = 0;
    const { suites, ran, failed } = await failures(() => new InMemoryStore(), { name: 'memory', close: () => void closed++ });
    expect(failed).toEqual([]);
    // What a user's test report lists: a store that implements every method runs all of them.
    expect(suites).toEqual(['store contract: memory']);
    expect(ran).toEqual([
      'has the methods the module calls, and every optional one it does not declare missing',
      'ping answers without touching a key',
      'peek reads a claim and a record with their expiry and changes nothing; forget deletes either, unfenced',
      'announce reaches the listener, with the key as announced (tested when the store has both)',
      'keys are compared whole and byte for byte: long, case, NFC/NFD and emoji keys stay apart',
      'claims a free key exactly once; others see it in flight with its fingerprint',
      'keeps a tagged fingerprint ("<tag>:<hash>") as it is, in flight and completed',
      'concurrent claims: exactly one wins',
      'commit replaces the claim; a later claim returns the record byte for byte',
      'keeps a 5 MB body, an empty body and many headers byte for byte',
      'keys are data: SQL, Lua and JSON look-alikes are stored literally and kept apart',
      'fencing: commit, release and renew by another owner change nothing',
      'release frees the key for a retry',
      "an unrenewed lease expires: another may take the key, and the late owner's commit is refused then",
      'a late owner whose lapsed claim nobody took over still commits',
      'renewal keeps a claim past its first lease',
      "renewAll renews each of the caller's claims in one call and refuses the rest, answering in order",
      'a record expires after its ttl',
      'closes',
    ]);
    expect(closed).toBe(1);
    // Given a way to plant a value of a newer release, one test more.
    const planted = await failures(() => new InMemoryStore(), { plant: async () => undefined });
    expect(planted.suites).toEqual(['store contract: store']);
    expect(planted.ran[3]).toBe('a record in a newer format is unreadable: never replayed, never taken over, forgettable');
  }, 60_000);

  it('stores a sample that is hard to keep: binary with CR, LF, NUL and 0xFF, a non-ASCII header with a newline, a repeated header', () => {
    const { fingerprint, response } = sampleRecord('fp-x');
    expect(fingerprint).toBe('fp-x');
    expect(response.status).toBe(402);
    expect(response.headers).toEqual({
      'content-type': 'application/octet-stream',
      location: '/p/1',
      'x-multi': ['a', 'b'],
      'x-text': 'ü\n?',
    });
    expect([...response.body]).toEqual([0, 10, 13, 0x52, 0x43, 0xff, 0xfe, 10, 0x7b]);
  });

  it('fails a store whose commit is not fenced by the owner', async () => {
    const { failed } = await failures(() => new UnfencedStore(), { without: ['ping', 'peek', 'forget', 'renewAll'] });
    expect(failed).toEqual([
      'fencing: commit, release and renew by another owner change nothing',
      "an unrenewed lease expires: another may take the key, and the late owner's commit is refused then",
    ]);
  }, 60_000);

  it('catches each way a store can be broken, with the tests that name it', async () => {
    const cases: Record<string, (inner: InMemoryStore) => Partial<IdempotencyStore>> = {
      'drops the last byte of a body': (inner) => ({
        commit: (k, o, r, t) =>
          inner.commit(k, o, { ...r, response: { ...r.response, body: r.response.body.subarray(0, -1) } }, t),
      }),
      'forgets the headers': (inner) => ({
        commit: (k, o, r, t) => inner.commit(k, o, { ...r, response: { ...r.response, headers: {} } }, t),
      }),
      'keeps a fingerprint without its tag': (inner) => ({
        claim: (k, c) => inner.claim(k, { ...c, fingerprint: c.fingerprint.split(':').at(-1)! }),
      }),
      'lets a second claimant in': (inner) => ({
        claim: async (k, c) => {
          const outcome = await inner.claim(k, c);
          return outcome.state === 'in-flight' ? { state: 'claimed' } : outcome;
        },
      }),
      'says a release freed what it did not': (inner) => ({ release: async (k, o) => (await inner.release(k, o), true) }),
      'never lets a lease lapse': (inner) => ({ claim: (k, c) => inner.claim(k, { ...c, leaseMs: 3_600_000 }) }),
      'answers a renewal without renewing': (inner) => ({ renew: async (k) => (await inner.peek(k))?.state === 'in-flight' }),
      'keeps records past their ttl': (inner) => ({ commit: (k, o, r) => inner.commit(k, o, r, 3_600_000) }),
      'refuses the commit of a lapsed claim nobody took over': (inner) => ({
        commit: async (k, o, r, t) => (await inner.peek(k))?.state === 'in-flight' && inner.commit(k, o, r, t),
      }),
      'answers yes to every renewAll': () => ({ renewAll: async (claims) => claims.map(() => true) }),
      'folds % and _ out of keys': (inner) => {
        const fold = (k: string) => k.replace(/[%_]/g, '');
        return {
          claim: (k, c) => inner.claim(fold(k), c),
          commit: (k, o, r, t) => inner.commit(fold(k), o, r, t),
        };
      },
      'has a ping that fails': () => ({ ping: () => Promise.reject(new Error('down')) }),
      // Issue 44 item 11: each of these passed the suite, and a different key got the first caller's body.
      'truncates keys to 64 characters': (inner) => keyed(inner, (k) => k.slice(0, 64)),
      'compares keys case-insensitively': (inner) => keyed(inner, (k) => k.toLowerCase()),
      'mangles non-ASCII keys': (inner) => keyed(inner, (k) => k.replace(/[^\x20-\x7e]/gu, '?')),
      'normalises keys to NFC': (inner) => keyed(inner, (k) => k.normalize('NFC')),
      'forgets only records': (inner) => ({
        forget: async (k) => (await inner.peek(k))?.state === 'completed' && inner.forget(k),
      }),
    };
    const results = await Promise.all(
      Object.entries(cases).map(async ([name, patch]) => {
        const { failed } = await failures(() => {
          const inner = new InMemoryStore();
          const own: IdempotencyStore = {
            claim: (k, c) => inner.claim(k, c),
            commit: (k, o, r, t) => inner.commit(k, o, r, t),
            release: (k, o) => inner.release(k, o),
            renew: (k, o, ms) => inner.renew(k, o, ms),
            ping: () => inner.ping(),
            peek: (k) => inner.peek(k),
            forget: (k) => inner.forget(k),
            renewAll: (claims, ms) => inner.renewAll(claims, ms),
          };
          return { ...own, ...patch(inner) };
        });
        return [name, failed] as const;
      }),
    );
    expect(Object.fromEntries(results)).toEqual({
      'drops the last byte of a body': [
        'peek reads a claim and a record with their expiry and changes nothing; forget deletes either, unfenced',
        'commit replaces the claim; a later claim returns the record byte for byte',
        'keeps a 5 MB body, an empty body and many headers byte for byte',
      ],
      'forgets the headers': [
        'commit replaces the claim; a later claim returns the record byte for byte',
        'keeps a 5 MB body, an empty body and many headers byte for byte',
      ],
      'keeps a fingerprint without its tag': ['keeps a tagged fingerprint ("<tag>:<hash>") as it is, in flight and completed'],
      'lets a second claimant in': [
        'peek reads a claim and a record with their expiry and changes nothing; forget deletes either, unfenced',
        'claims a free key exactly once; others see it in flight with its fingerprint',
        'keeps a tagged fingerprint ("<tag>:<hash>") as it is, in flight and completed',
        'concurrent claims: exactly one wins',
        'fencing: commit, release and renew by another owner change nothing',
        'renewal keeps a claim past its first lease',
      ],
      'says a release freed what it did not': ['fencing: commit, release and renew by another owner change nothing'],
      'never lets a lease lapse': [
        'peek reads a claim and a record with their expiry and changes nothing; forget deletes either, unfenced',
        "an unrenewed lease expires: another may take the key, and the late owner's commit is refused then",
        "renewAll renews each of the caller's claims in one call and refuses the rest, answering in order",
      ],
      'answers a renewal without renewing': [
        'fencing: commit, release and renew by another owner change nothing',
        'renewal keeps a claim past its first lease',
      ],
      'keeps records past their ttl': [
        'peek reads a claim and a record with their expiry and changes nothing; forget deletes either, unfenced',
        'a record expires after its ttl',
      ],
      'refuses the commit of a lapsed claim nobody took over': ['a late owner whose lapsed claim nobody took over still commits'],
      'answers yes to every renewAll': [
        "renewAll renews each of the caller's claims in one call and refuses the rest, answering in order",
      ],
      'folds % and _ out of keys': ['keys are data: SQL, Lua and JSON look-alikes are stored literally and kept apart'],
      'has a ping that fails': ['ping answers without touching a key'],
      'truncates keys to 64 characters': [
        'keys are compared whole and byte for byte: long, case, NFC/NFD and emoji keys stay apart',
      ],
      'compares keys case-insensitively': [
        'keys are compared whole and byte for byte: long, case, NFC/NFD and emoji keys stay apart',
      ],
      'mangles non-ASCII keys': ['keys are compared whole and byte for byte: long, case, NFC/NFD and emoji keys stay apart'],
      'normalises keys to NFC': ['keys are compared whole and byte for byte: long, case, NFC/NFD and emoji keys stay apart'],
      'forgets only records': [
        'peek reads a claim and a record with their expiry and changes nothing; forget deletes either, unfenced',
      ],
    });
  }, 60_000);

  it('fails a store that lacks an optional method it does not declare; declared, its tests are left out', async () => {
    const lacking = () => {
      const store = new InMemoryStore();
      return {
        claim: store.claim.bind(store),
        commit: store.commit.bind(store),
        release: store.release.bind(store),
        renew: store.renew.bind(store),
        ping: store.ping.bind(store),
      };
    };
    const undeclared = await failures(lacking);
    expect(undeclared.failed).toContain('has the methods the module calls, and every optional one it does not declare missing');
    expect(undeclared.reasons).toContainEqual(
      expect.stringContaining("the store has no peek(): implement it, or pass without: ['peek']"),
    );
    const noRenew = await failures(() => ({ ...lacking(), renew: undefined as never }), {
      without: ['peek', 'forget', 'renewAll'],
    });
    expect(noRenew.reasons[0]).toContain('the store has no renew()');
    const declared = await failures(lacking, { without: ['peek', 'forget', 'renewAll'] });
    expect(declared.failed).toEqual([]);
    expect(declared.ran.some((name) => /peek|renewAll/.test(name))).toBe(false);
  }, 60_000);
});
