import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { IdempotencyClaim, IdempotencyStore } from '../stores/contract/idempotency-store.interface.js';
import { pause, same, sampleRecord } from './store-contract.assertions.js';
import { keyIdentityTests, sharedBackendTest } from './store-contract.keys.js';
import { optionalReadTests, renewAllTest, wakeupTest } from './store-contract.optional.js';
import { OPTIONAL_METHODS, type ContractFramework, type StoreContractOptions } from './store-contract.options.js';

/**
 * The contract every {@link IdempotencyStore} must keep, as a test suite: the one this package's four
 * stores pass. Give it your framework's `describe` and `it`, and a function that opens your store; it
 * asserts with `node:assert`, so it runs under jest, vitest and `node:test` alike. Leases and records
 * expire for real (the shortest in 100 ms), because a store may keep its own clock; the slowest test
 * takes about 2 s, and one writes a 5 MB record, so allow each test 30 s.
 *
 * @example
 * import { describe, it } from 'node:test';
 * storeContract({ describe, it }, async () => new MyStore(...), { name: 'MyStore', close: (s) => s.close?.() });
 */
export function storeContract(
  framework: ContractFramework,
  open: () => Promise<IdempotencyStore> | IdempotencyStore,
  options: StoreContractOptions = {},
): void {
  const { plant, close, without = [], another } = options;
  const has = (method: (typeof OPTIONAL_METHODS)[number]) => !without.includes(method);
  framework.describe(`store contract: ${options.name ?? 'store'}`, () => {
    let store: IdempotencyStore;
    let opening: Promise<IdempotencyStore> | undefined;
    /** Each test opens the store if no test did yet: a filtered run (`it.only`) still has one. */
    const test = (name: string, body: () => Promise<void>) =>
      framework.it(name, async () => {
        store = await (opening ??= Promise.resolve().then(open));
        await body();
      });
    const key = () => `idem:contract:${randomUUID()}`;
    const claim = (owner: string, fingerprint = 'fp-1', leaseMs = 5000): IdempotencyClaim => ({ owner, fingerprint, leaseMs });

    test('has the methods the module calls, and every optional one it does not declare missing', async () => {
      for (const method of ['claim', 'commit', 'release', 'renew'] as const)
        assert.equal(typeof store[method], 'function', `the store has no ${method}()`);
      for (const method of OPTIONAL_METHODS) {
        const hint = `the store has no ${method}(): implement it, or pass without: ['${method}']`;
        if (has(method)) assert.equal(typeof store[method], 'function', hint);
      }
    });

    const context = { test, store: () => store, key, claim, has, plant };
    optionalReadTests(context);
    wakeupTest(context);
    keyIdentityTests(context);
    if (another) sharedBackendTest(context, another, close);

    test('claims a free key exactly once; others see it in flight with its fingerprint', async () => {
      const k = key();
      same(await store.claim(k, claim('a')), { state: 'claimed' });
      same(await store.claim(k, claim('b', 'fp-2')), { state: 'in-flight', fingerprint: 'fp-1' });
    });

    test('keeps a tagged fingerprint ("<tag>:<hash>") as it is, in flight and completed', async () => {
      const k = key();
      const tagged = 'f1-Ab_9-xYz:47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU';
      await store.claim(k, claim('a', tagged));
      same(await store.claim(k, claim('b', 'fp-2')), { state: 'in-flight', fingerprint: tagged });
      assert.strictEqual(await store.commit(k, 'a', sampleRecord(tagged), 5000), true);
      const outcome = await store.claim(k, claim('b'));
      assert.strictEqual(outcome.state === 'completed' && outcome.record.fingerprint, tagged);
    });

    test('concurrent claims: exactly one wins', async () => {
      const k = key();
      const outcomes = await Promise.all(Array.from({ length: 50 }, (_, i) => store.claim(k, claim(`o${i}`))));
      assert.strictEqual(outcomes.filter((o) => o.state === 'claimed').length, 1);
      assert.strictEqual(outcomes.filter((o) => o.state === 'in-flight').length, 49);
    });

    test('commit replaces the claim; a later claim returns the record byte for byte', async () => {
      const k = key();
      await store.claim(k, claim('a', 'fp-r'));
      assert.strictEqual(await store.commit(k, 'a', sampleRecord('fp-r'), 5000), true);
      const outcome = await store.claim(k, claim('b'));
      assert.strictEqual(outcome.state, 'completed');
      if (outcome.state !== 'completed') return;
      assert.strictEqual(outcome.record.fingerprint, 'fp-r');
      assert.strictEqual(outcome.record.response.status, 402);
      same(outcome.record.response.headers, sampleRecord('x').response.headers);
      assert.strictEqual(Buffer.compare(outcome.record.response.body, sampleRecord('x').response.body), 0);
    });

    test('keeps a 5 MB body, an empty body and many headers byte for byte', async () => {
      const big = Buffer.alloc(5 * 1024 * 1024);
      for (let i = 0; i < big.length; i++) big[i] = (i * 31) & 0xff;
      const headers: Record<string, string | string[]> = {};
      for (let i = 0; i < 200; i++) headers[`x-h${i}`] = i % 2 ? `v${i}` : [`a${i}`, `b${i}`];
      for (const body of [big, Buffer.alloc(0)]) {
        const k = key();
        await store.claim(k, claim('a', 'fp-big'));
        const record = { fingerprint: 'fp-big', response: { status: 201, headers, body } };
        assert.strictEqual(await store.commit(k, 'a', record, 5000), true);
        const outcome = await store.claim(k, claim('b'));
        assert.strictEqual(outcome.state, 'completed');
        if (outcome.state !== 'completed') return;
        same(outcome.record.response.headers, headers);
        assert.strictEqual(Buffer.compare(outcome.record.response.body, body), 0);
      }
    });

    test('keys are data: SQL, Lua and JSON look-alikes are stored literally and kept apart', async () => {
      const base = key();
      const keys = [
        `${base}'; DROP TABLE idempotency_records; --`,
        `${base}" OR 1=1 --`,
        `${base}{"$ne":null}`,
        `${base}%`,
        `${base}_`,
      ];
      for (const [i, k] of keys.entries()) {
        same(await store.claim(k, claim(`o${i}`, `fp-${i}`)), { state: 'claimed' });
        assert.strictEqual(await store.commit(k, `o${i}`, sampleRecord(`fp-${i}`), 5000), true);
      }
      for (const [i, k] of keys.entries()) {
        const outcome = await store.claim(k, claim('z'));
        assert.strictEqual(outcome.state === 'completed' && outcome.record.fingerprint, `fp-${i}`);
      }
    });

    test('fencing: commit, release and renew by another owner change nothing', async () => {
      const k = key();
      await store.claim(k, claim('owner'));
      assert.strictEqual(await store.commit(k, 'intruder', sampleRecord('fp-1'), 5000), false);
      assert.strictEqual(await store.release(k, 'intruder'), false);
      assert.strictEqual(await store.renew(k, 'intruder', 5000), false);
      same(await store.claim(k, claim('x')), { state: 'in-flight', fingerprint: 'fp-1' });
      // An owner whose token is a prefix of the real one is still someone else.
      assert.strictEqual(await store.release(k, 'own'), false);
      assert.strictEqual(await store.commit(k, 'owner', sampleRecord('fp-1'), 5000), true);
      assert.strictEqual(await store.release(k, 'owner'), false); // a record is no claim
      assert.strictEqual(await store.commit(k, 'owner', sampleRecord('fp-1'), 5000), false);
      assert.strictEqual((await store.claim(k, claim('y'))).state, 'completed');
    });

    test('release frees the key for a retry', async () => {
      const k = key();
      await store.claim(k, claim('a'));
      assert.strictEqual(await store.release(k, 'a'), true);
      same(await store.claim(k, claim('b')), { state: 'claimed' });
    });

    test("an unrenewed lease expires: another may take the key, and the late owner's commit is refused then", async () => {
      const k = key();
      await store.claim(k, claim('slow', 'fp-1', 100));
      await pause(160);
      same(await store.claim(k, claim('next', 'fp-1', 5000)), { state: 'claimed' });
      assert.strictEqual(await store.commit(k, 'slow', sampleRecord('stale'), 5000), false);
      assert.strictEqual(await store.commit(k, 'next', sampleRecord('fresh'), 5000), true);
      const outcome = await store.claim(k, claim('z'));
      assert.strictEqual(outcome.state === 'completed' && outcome.record.fingerprint, 'fresh');
    });

    // The owner token is the fence; expiry only lets a new claimant in. A handler that outlived its
    // lease (a stalled process, a slow renewal) still stores its response if nobody took the key, so a
    // retry replays it instead of running the handler a second time. A store may keep the lapsed claim
    // (and commit over it) or drop it (and commit on the empty key).
    test('a late owner whose lapsed claim nobody took over still commits', async () => {
      const k = key();
      await store.claim(k, claim('slow', 'fp-1', 100));
      await pause(160);
      assert.strictEqual(await store.commit(k, 'slow', sampleRecord('late'), 5000), true);
      const outcome = await store.claim(k, claim('z'));
      assert.strictEqual(outcome.state === 'completed' && outcome.record.fingerprint, 'late');
      assert.strictEqual(await store.commit(k, 'slow', sampleRecord('again'), 5000), false);
    });

    test('renewal keeps a claim past its first lease', async () => {
      const k = key();
      // A second of margin for a loaded CI machine: each renewal comes at a third of the lease. The
      // last look is half a second past the first lease, so a store that only says it renewed has
      // certainly let the claim lapse by then (three pauses ended exactly at the lease's end).
      await store.claim(k, claim('a', 'fp-1', 1_500));
      for (let i = 0; i < 4; i++) {
        await pause(500);
        assert.strictEqual(await store.renew(k, 'a', 1_500), true);
      }
      assert.strictEqual((await store.claim(k, claim('b'))).state, 'in-flight');
    });

    renewAllTest(context);

    test('a record expires after its ttl', async () => {
      const k = key();
      await store.claim(k, claim('a'));
      await store.commit(k, 'a', sampleRecord('fp-1'), 500);
      assert.strictEqual((await store.claim(k, claim('b'))).state, 'completed');
      await pause(560);
      same(await store.claim(k, claim('c')), { state: 'claimed' });
    });

    test('closes', async () => {
      await close?.(store);
    });
  });
}
