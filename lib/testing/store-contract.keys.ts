import assert from 'node:assert/strict';
import type { IdempotencyStore } from '../stores/contract/idempotency-store.interface.js';
import { same, sampleRecord } from './store-contract.assertions.js';
import type { ContractContext } from './store-contract.optional.js';

/**
 * Pairs of keys a store must keep apart: each differs from its partner only where a store that cuts,
 * folds or re-encodes keys would lose the difference (a different key then got the first caller's body).
 */
function keyPairs(base: string): [string, string, string][] {
  const long = `${base}:${'x'.repeat(200)}`;
  return [
    ['long keys differing after character 200', `${long}a`, `${long}b`],
    ['keys differing in case only', `${base}:Key-A`, `${base}:key-a`],
    ['non-ASCII keys (NFC and NFD forms of é)', `${base}:caf\u00e9`, `${base}:cafe\u0301`],
    ['non-ASCII keys (other scripts, emoji)', `${base}:\u6ce8\u6587-\u{1f600}`, `${base}:\u6ce8\u6587-\u{1f601}`],
  ];
}

/** The contract of key identity: keys are compared byte for byte, whole, as UTF-8. */
export function keyIdentityTests({ test, store, key, claim }: ContractContext): void {
  test('keys are compared whole and byte for byte: long, case, NFC/NFD and emoji keys stay apart', async () => {
    for (const [what, first, second] of keyPairs(key())) {
      same(await store().claim(first, claim('a', 'fp-first')), { state: 'claimed' }, `${what}: the first`);
      assert.strictEqual(await store().commit(first, 'a', sampleRecord('fp-first'), 5000), true, `${what}: its commit`);
      same(await store().claim(second, claim('b', 'fp-second')), { state: 'claimed' }, `${what}: the second is another key`);
      const again = await store().claim(first, claim('c'));
      assert.strictEqual(again.state === 'completed' && again.record.fingerprint, 'fp-first', `${what}: the first reads back`);
    }
  });
}

/**
 * The contract across instances: two stores opened over one backend (two processes, two pods) share
 * keys, and a claim is atomic across them, not only inside one process.
 */
export function sharedBackendTest(
  { test, store, key, claim }: ContractContext,
  another: () => Promise<IdempotencyStore> | IdempotencyStore,
  close: ((store: IdempotencyStore) => Promise<void> | void) | undefined,
): void {
  test('two instances over one backend: concurrent claims across them, exactly one wins; a commit on one replays on the other', async () => {
    const other = await another();
    try {
      const k = key();
      const outcomes = await Promise.all(
        Array.from({ length: 20 }, (_, i) => (i % 2 ? other : store()).claim(k, claim(`o${i}`))),
      );
      assert.strictEqual(outcomes.filter((o) => o.state === 'claimed').length, 1, 'claims that won across two instances');
      const winner = outcomes.findIndex((o) => o.state === 'claimed');
      assert.strictEqual(await (winner % 2 ? other : store()).commit(k, `o${winner}`, sampleRecord('fp-1'), 5000), true);
      const seen = await (winner % 2 ? store() : other).claim(k, claim('z'));
      assert.strictEqual(seen.state === 'completed' && seen.record.fingerprint, 'fp-1', 'the record read on the other instance');
    } finally {
      await close?.(other);
    }
  });
}
