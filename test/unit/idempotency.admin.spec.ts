import { describe, expect, it } from '@jest/globals';
import { ResponseSealer } from '../../lib/ops/encryption/response.sealer.js';
import { IdempotencyAdmin, type IdempotencyModuleOptions, type IdempotencyStore, InMemoryStore } from '../../lib/index.js';
import { resolveModuleOptions } from '../../lib/shared/options/module-options.resolver.js';

function admin(options: IdempotencyModuleOptions): IdempotencyAdmin {
  const resolved = resolveModuleOptions(options, () => new InMemoryStore());
  return new IdempotencyAdmin(resolved, new ResponseSealer(resolved));
}

describe('IdempotencyAdmin', () => {
  it('refuses a store without peek() or forget(), naming the store and the method', async () => {
    const { claim, commit, release, renew } = new InMemoryStore();
    const bare: IdempotencyStore = { claim, commit, release, renew };
    await expect(admin({ store: bare }).inspect('k')).rejects.toThrow(
      "IdempotencyAdmin needs IdempotencyStore's peek(), which Object lacks",
    );
    await expect(admin({ store: bare }).forget('k')).rejects.toThrow("IdempotencyAdmin needs IdempotencyStore's forget()");
  });

  it('refuses a key or scope that is not a non-empty string', async () => {
    const a = admin({});
    for (const key of ['', 5, undefined]) {
      await expect(a.forget(key as never)).rejects.toThrow(
        'IdempotencyAdmin: the key must be a non-empty string, as the client sent it',
      );
    }
    for (const scope of ['', 7, null]) {
      await expect(a.inspect('k', { scope: scope as never })).rejects.toThrow(
        'IdempotencyAdmin: scope must be a non-empty string, as the identity resolver returns it',
      );
    }
  });

  it('finds keys under the module prefix and the escaped scope', async () => {
    const cache = new InMemoryStore();
    const a = admin({ store: cache, keyPrefix: 'pay:' });
    await cache.claim('pay:acct%3A1:k', { owner: 'o', fingerprint: 'fp', leaseMs: 5000 });
    await cache.claim('pay:%:k', { owner: 'o', fingerprint: 'fp-unscoped', leaseMs: 5000 });
    expect((await a.inspect('k', { scope: 'acct:1' }))?.fingerprint).toBe('fp');
    expect((await a.inspect('k'))?.fingerprint).toBe('fp-unscoped');
  });

  // Issue 49 item 5: the runbook for an unreadable record could not reach GraphQL records.
  it("names a mutation's, a message handler's and an inbox consumer's records, under a scope too; at most one of them", async () => {
    const cache = new InMemoryStore();
    const a = admin({ store: cache });
    const claimed = (storeKey: string, fingerprint: string) => cache.claim(storeKey, { owner: 'o', fingerprint, leaseMs: 5000 });
    await claimed('idem:alice%GRefunds.refund:k', 'fp-mutation');
    await claimed('idem:%%MOrders.created:k', 'fp-message');
    await claimed('idem:t%3A1%IOrders:k', 'fp-inbox');
    expect((await a.inspect('k', { mutation: 'Refunds.refund', scope: 'alice' }))?.fingerprint).toBe('fp-mutation');
    expect((await a.inspect('k', { messageHandler: 'Orders.created' }))?.fingerprint).toBe('fp-message');
    expect((await a.inspect('k', { consumer: 'Orders', scope: 't:1' }))?.fingerprint).toBe('fp-inbox');
    expect(await a.inspect('k')).toBeUndefined();
    expect(await a.forget('k', { mutation: 'Refunds.refund', scope: 'alice' })).toBe(true);
    for (const target of [{ mutation: 'A.b', consumer: 'C' }, { messageHandler: '' }, { consumer: 5 }]) {
      await expect(a.inspect('k', target as never)).rejects.toThrow('IdempotencyAdmin: name at most one of consumer');
    }
  });

  it('passes on an error of the store that is not about a sealed record', async () => {
    class Broken extends InMemoryStore {
      override peek(): never {
        throw new Error('store down');
      }
    }
    await expect(admin({ store: new Broken() }).inspect('k')).rejects.toThrow('store down');
  });
});
