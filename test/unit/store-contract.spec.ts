import { describe, expect, it } from '@jest/globals';
import { type IdempotencyClaim, type IdempotencyRecord, type IdempotencyStore, InMemoryStore } from '../../lib/index.js';
import { type ContractFramework, storeContract, type StoreContractOptions } from '../../lib/testing/index.js';

/** Registers the shipped suite into a framework of our own, runs it, and names the tests that failed. */
async function failures(
  open: () => IdempotencyStore,
  options?: StoreContractOptions,
): Promise<{ ran: string[]; failed: string[] }> {
  const tests: { name: string; body: () => Promise<void> }[] = [];
  const framework: ContractFramework = {
    describe: (_, body) => body(),
    it: (name, body) => tests.push({ name, body }),
  };
  storeContract(framework, open, options);
  const failed: string[] = [];
  for (const test of tests) await test.body().catch(() => failed.push(test.name));
  return { ran: tests.map((t) => t.name), failed };
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

describe('the shipped store contract (nestjs-idempotency/testing)', () => {
  it('passes a correct store, and closes it in its last test', async () => {
    let closed = 0;
    const { ran, failed } = await failures(() => new InMemoryStore(), { name: 'memory', close: () => void closed++ });
    expect(failed).toEqual([]);
    expect(ran.length).toBeGreaterThanOrEqual(15);
    expect(ran.at(-1)).toBe('closes');
    expect(closed).toBe(1);
  }, 60_000);

  it('fails a store whose commit is not fenced by the owner', async () => {
    const { failed } = await failures(() => new UnfencedStore(), { without: ['ping', 'peek', 'forget', 'renewAll'] });
    expect(failed).toEqual([
      'fencing: commit, release and renew by another owner change nothing',
      'an unrenewed lease expires; the late owner can no longer commit',
    ]);
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
    expect((await failures(lacking)).failed).toContain(
      'has the methods the module calls, and every optional one it does not declare missing',
    );
    const declared = await failures(lacking, { without: ['peek', 'forget', 'renewAll'] });
    expect(declared.failed).toEqual([]);
    expect(declared.ran.some((name) => /peek|renewAll/.test(name))).toBe(false);
  }, 60_000);
});
