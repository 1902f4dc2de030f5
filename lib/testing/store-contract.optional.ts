import assert from 'node:assert/strict';
import type { IdempotencyClaim, IdempotencyStore } from '../stores/contract/idempotency-store.interface.js';
import { near, same, sampleRecord } from './store-contract.assertions.js';
import type { OptionalStoreMethod, StoreContractOptions } from './store-contract.options.js';

/** What the contract's tests share: how a test is declared, the store under test, fresh keys and claims. */
export interface ContractContext {
  test: (name: string, body: () => Promise<void>) => unknown;
  store: () => IdempotencyStore;
  key: () => string;
  claim: (owner: string, fingerprint?: string, leaseMs?: number) => IdempotencyClaim;
  has: (method: OptionalStoreMethod) => boolean;
  plant: StoreContractOptions['plant'];
}

/** The contract of `ping`, `peek` and `forget`, each for a store that has it. */
export function optionalReadTests({ test, store, key, claim, has, plant }: ContractContext): void {
  if (has('ping'))
    test('ping answers without touching a key', async () => {
      assert.equal(await store().ping!(), undefined);
    });

  if (has('peek') && has('forget'))
    test('peek reads a claim and a record with their expiry and changes nothing; forget deletes either, unfenced', async () => {
      const k = key();
      assert.strictEqual(await store().peek!(k), undefined);
      assert.strictEqual(await store().forget!(k), false);
      await store().claim(k, claim('a', 'fp-p', 4000));
      const inFlight = await store().peek!(k);
      same(
        { ...inFlight, expiresAt: typeof inFlight?.expiresAt },
        { state: 'in-flight', fingerprint: 'fp-p', expiresAt: 'number' },
      );
      near(inFlight!.expiresAt, Date.now() + 4000, "the claim's expiresAt");
      same(await store().claim(k, claim('b')), { state: 'in-flight', fingerprint: 'fp-p' });
      assert.strictEqual(await store().commit(k, 'a', sampleRecord('fp-p'), 9000), true);
      const done = await store().peek!(k);
      assert.strictEqual(done?.state, 'completed');
      near(done.expiresAt, Date.now() + 9000, "the record's expiresAt");
      if (done?.state !== 'completed') return;
      assert.strictEqual(done.record.response.status, 402);
      assert.strictEqual(Buffer.compare(done.record.response.body, sampleRecord('x').response.body), 0);
      assert.strictEqual(await store().forget!(k), true);
      assert.strictEqual(await store().peek!(k), undefined);
      same(await store().claim(k, claim('c')), { state: 'claimed' });
      // A claim forgotten under its running handler: that handler can no longer renew, and once a
      // retry claims the key, no longer commit (before that a store may let it, as after a lapse).
      assert.strictEqual(await store().forget!(k), true);
      assert.strictEqual(await store().renew(k, 'c', 5000), false);
      same(await store().claim(k, claim('d')), { state: 'claimed' });
      assert.strictEqual(await store().commit(k, 'c', sampleRecord('fp-1'), 5000), false);
    });

  // Only where the suite can write a raw value the way the store keeps records.
  if (plant && has('peek') && has('forget'))
    test('a record in a newer format is unreadable: never replayed, never taken over, forgettable', async () => {
      const k = key();
      await plant(store(), k, Buffer.from('V9\nfp-future\n{"sealed":true}'), 5000);
      const outcome = await store().claim(k, claim('a'));
      assert.strictEqual(outcome.state, 'unreadable');
      assert.match((outcome as { reason: string }).reason, /format 9/);
      same(await store().claim(k, claim('b')), outcome);
      const peeked = await store().peek!(k);
      same({ ...peeked, expiresAt: typeof peeked?.expiresAt }, { ...outcome, expiresAt: 'number' });
      assert.strictEqual(await store().forget!(k), true);
      same(await store().claim(k, claim('c')), { state: 'claimed' });
    });
}

/** The contract of `renewAll`, for a store that has it (and `peek`, to see the leases it renewed). */
export function renewAllTest({ test, store, key, claim, has }: ContractContext): void {
  if (has('renewAll') && has('peek'))
    test("renewAll renews each of the caller's claims in one call and refuses the rest, answering in order", async () => {
      const [a, b, c, d] = [key(), key(), key(), key()];
      await store().claim(a, claim('a', 'fp-1', 1000));
      await store().claim(b, claim('b', 'fp-1', 1000));
      await store().claim(c, claim('c'));
      await store().commit(c, 'c', sampleRecord('fp-1'), 5000);
      const before = (await store().peek!(a))!.expiresAt;
      const owned = [
        { key: a, owner: 'a' },
        { key: b, owner: 'intruder' },
        { key: c, owner: 'c' },
        { key: d, owner: 'd' },
        { key: b, owner: 'b' },
      ];
      same(await store().renewAll!(owned, 60_000), [true, false, false, false, true]);
      const after = (await store().peek!(a))!.expiresAt;
      assert.ok(after > before + 30_000, `renewAll did not extend the lease: expiresAt ${before}, then ${after}`);
      assert.strictEqual((await store().peek!(c))!.state, 'completed');
      assert.strictEqual(await store().peek!(d), undefined);
      same(await store().renewAll!([], 1000), []);
    });
}

/** The contract of `announce` and `listen` (waiting duplicates across processes), for a store that has both. */
export function wakeupTest({ test, store, key }: ContractContext): void {
  test('announce reaches the listener, with the key as announced (tested when the store has both)', async () => {
    const s = store();
    if (typeof s.announce !== 'function' || typeof s.listen !== 'function') return;
    const heard: string[] = [];
    await s.listen((k) => heard.push(k));
    const k = key();
    await s.announce(k);
    // Delivered through the server, so it arrives after announce() resolves; five seconds at most.
    for (let i = 0; i < 100 && !heard.includes(k); i++) await new Promise((r) => setTimeout(r, 50));
    assert.ok(heard.includes(k), `the listener did not hear ${k}; it heard ${heard.length} other keys`);
  });
}
