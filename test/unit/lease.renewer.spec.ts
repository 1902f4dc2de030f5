import { describe, expect, it, jest } from '@jest/globals';
import { AsyncLocalStorage } from 'node:async_hooks';
import type { OwnedKey } from '../../lib/stores/index.js';
import { spyOnLogger } from '../support/logger.js';
import { createProtocol as setup } from '../support/protocol.js';
import { activeClaim } from '../support/claims.js';

describe('LeaseRenewer', () => {
  const log = spyOnLogger();
  const claim = activeClaim();

  it('renews every held claim each third of the lease, with one timer, until unheld', async () => {
    jest.useFakeTimers();
    const { store, leases } = setup({ leaseMs: 10 });
    const other = { ...claim, storeKey: 'idem:%:k2', owner: 'you' };
    leases.hold(claim);
    leases.hold(other);
    expect(jest.getTimerCount()).toBe(1);
    await jest.advanceTimersByTimeAsync(2);
    expect(store.calls).toEqual([]);
    await jest.advanceTimersByTimeAsync(1);
    expect(store.calls).toEqual([
      ['renew', 'idem:%:k', 'me', 10],
      ['renew', 'idem:%:k2', 'you', 10],
    ]);
    leases.unhold(claim);
    store.calls.length = 0;
    await jest.advanceTimersByTimeAsync(3);
    expect(store.calls).toEqual([['renew', 'idem:%:k2', 'you', 10]]);
    leases.unhold(other);
    store.calls.length = 0;
    await jest.advanceTimersByTimeAsync(30);
    expect(store.calls).toEqual([]);
    expect(jest.getTimerCount()).toBe(1);
    await leases.drain();
    expect(jest.getTimerCount()).toBe(0);
  });

  it('renews all held claims in one renewAll() call per tick when the store has one, and marks how long each is held', async () => {
    jest.useFakeTimers({ now: 5_000 });
    const { store, leases } = setup({ leaseMs: 30 });
    const batches: [readonly OwnedKey[], number][] = [];
    Object.assign(store, {
      renewAll: async (claims: readonly OwnedKey[], leaseMs: number) => {
        batches.push([claims, leaseMs]);
        return claims.map((c) => c.owner !== 'gone');
      },
    });
    const held = Array.from({ length: 50 }, (_, i) => ({ ...claim, storeKey: `idem:%:k${i}`, owner: `o${i}` }));
    for (const c of held) leases.hold(c);
    await jest.advanceTimersByTimeAsync(10);
    expect(batches).toHaveLength(1);
    expect(batches[0][0]).toHaveLength(50);
    expect(batches[0][0][7]).toEqual({ key: 'idem:%:k7', owner: 'o7' });
    expect(batches[0][1]).toBe(30);
    expect(store.calls).toEqual([]);
    for (const c of held) leases.unhold(c);
    await leases.drain();
  });

  it('renews outside the async context of the request whose claim started its timer', async () => {
    jest.useRealTimers();
    const { store, leases } = setup({ leaseMs: 30 });
    const request = new AsyncLocalStorage<string>();
    const seen = new Promise<string | undefined>((resolve) =>
      Object.assign(store, {
        renewAll: async (claims: readonly OwnedKey[]) => {
          resolve(request.getStore());
          return claims.map(() => true);
        },
      }),
    );
    request.run('first request', () => leases.hold(claim));
    expect(await seen).toBeUndefined();
    leases.unhold(claim);
    await leases.drain();
  });

  it('stops renewing a claim held for maxHoldMs, with a warning naming the route', async () => {
    jest.useFakeTimers({ now: 1_000 });
    const { store, leases } = setup({ leaseMs: 30, maxHoldMs: 60 });
    const held = { ...claim, claimedAt: 1_000 };
    leases.hold(held);
    await jest.advanceTimersByTimeAsync(50);
    expect(store.calls).toHaveLength(5);
    expect(log.warnings).not.toHaveBeenCalled();
    await jest.advanceTimersByTimeAsync(10);
    expect(store.calls).toHaveLength(5);
    expect(log.warnings).toHaveBeenCalledWith(
      'Pay.create: the handler has held its key for 60 ms (maxHoldMs) without finishing; the lease is no longer renewed and lapses, after which a retry runs the handler again',
    );
    expect((log.warnings.mock.contexts[0] as { context?: string }).context).toBe('Idempotency');
    await jest.advanceTimersByTimeAsync(100);
    expect(store.calls).toHaveLength(5);
    expect(log.warnings).toHaveBeenCalledTimes(1);
    await leases.drain();
  });

  it('logs a lost lease once and stops renewing that claim', async () => {
    jest.useFakeTimers();
    const { store, leases } = setup({ leaseMs: 3 });
    const mine = activeClaim();
    leases.hold(mine);
    store.renewAnswer = async () => false;
    await jest.advanceTimersByTimeAsync(1);
    expect(log.warnings).toHaveBeenCalledWith('Pay.create: lease lost while the handler was still running');
    expect(mine.lost).toBe(true);
    await jest.advanceTimersByTimeAsync(10);
    expect(log.warnings).toHaveBeenCalledTimes(1);
    expect(store.calls).toHaveLength(1);
    expect(leases.size).toBe(0);
    await leases.drain();
  });

  it('is no loss when the claim was committed or released while its renewal was under way', async () => {
    jest.useFakeTimers();
    const { store, leases } = setup({ leaseMs: 3 });
    const settling = activeClaim({ owner: 'a' });
    const unheld = activeClaim({ owner: 'b', storeKey: 'idem:%:b' });
    leases.hold(settling);
    leases.hold(unheld);
    store.renewAnswer = () =>
      new Promise((r) => {
        settling.settling = true;
        leases.unhold(unheld);
        r(false);
      });
    await jest.advanceTimersByTimeAsync(1);
    expect(log.warnings).not.toHaveBeenCalled();
    expect(settling.lost).toBeUndefined();
    expect(unheld.lost).toBeUndefined();
    leases.unhold(settling);
    await leases.drain();
  });

  it('sends a failed renewal again at once, not a tick later, and logs the first failure of a run', async () => {
    jest.useFakeTimers({ now: 0 });
    const { store, leases } = setup({ leaseMs: 3_000 });
    const mine = activeClaim({ claimedAt: 0, leaseMs: 3_000 });
    leases.hold(mine);
    store.renewAnswer = () => Promise.reject(new Error('timeout'));
    await jest.advanceTimersByTimeAsync(1_000);
    expect(store.calls).toHaveLength(1);
    expect(log.errors).toHaveBeenCalledWith('Pay.create: lease renewal failed: timeout');
    await jest.advanceTimersByTimeAsync(50);
    expect(store.calls).toHaveLength(2);
    await jest.advanceTimersByTimeAsync(100);
    expect(store.calls).toHaveLength(3);
    expect(log.errors).toHaveBeenCalledTimes(1);
    store.renewAnswer = async () => true;
    await jest.advanceTimersByTimeAsync(200);
    expect(store.calls).toHaveLength(4);
    expect(log.warnings).not.toHaveBeenCalled();
    leases.unhold(mine);
    await leases.drain();
  });

  it('sends no second renewal while one is under way', async () => {
    jest.useFakeTimers();
    const { store, leases } = setup({ leaseMs: 3 });
    leases.hold(claim);
    let answer!: (v: boolean) => void;
    store.renewAnswer = () => new Promise((r) => (answer = r));
    await jest.advanceTimersByTimeAsync(10);
    expect(store.calls).toHaveLength(1);
    answer(true);
    await jest.advanceTimersByTimeAsync(1);
    expect(store.calls).toHaveLength(2);
    answer(true);
    leases.unhold(claim);
    await leases.drain();
  });

  it('keeps its timer from holding the process open, and starts a new one after drain', async () => {
    const { leases } = setup({ leaseMs: 60_000 });
    leases.hold(claim);
    const timer = (leases as unknown as { timer: NodeJS.Timeout }).timer;
    expect(timer.hasRef()).toBe(false);
    leases.unhold(claim);
    await leases.drain();
    expect((leases as unknown as { timer?: NodeJS.Timeout }).timer).toBeUndefined();
    leases.hold(claim);
    const next = (leases as unknown as { timer: NodeJS.Timeout }).timer;
    expect(next).toBeDefined();
    expect(next).not.toBe(timer);
    leases.unhold(claim);
    await leases.drain();
  });

  it('drain() renews until the last held claim is unheld, then stops', async () => {
    jest.useFakeTimers();
    const { store, leases } = setup({ leaseMs: 30 });
    const mine = activeClaim();
    const other = activeClaim({ storeKey: 'idem:%:other', owner: 'other' });
    leases.hold(mine);
    leases.hold(other);
    let drained = false;
    void leases.drain().then(() => (drained = true));
    await jest.advanceTimersByTimeAsync(100);
    expect(drained).toBe(false);
    expect(store.calls.length).toBeGreaterThanOrEqual(9);
    // A rolling deploy waits for every running handler, not the first to finish.
    leases.unhold(other);
    await jest.advanceTimersByTimeAsync(0);
    expect(drained).toBe(false);
    leases.unhold(mine);
    await jest.advanceTimersByTimeAsync(0);
    expect(drained).toBe(true);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('drain() gives up when the last claim reaches maxHoldMs', async () => {
    jest.useFakeTimers({ now: 0 });
    const { leases } = setup({ leaseMs: 30, maxHoldMs: 200 });
    leases.hold(activeClaim({ claimedAt: 0 }));
    let drained = false;
    void leases.drain().then(() => (drained = true));
    await jest.advanceTimersByTimeAsync(199);
    expect(drained).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    expect(drained).toBe(true);
    expect(leases.size).toBe(0);
  });

  it('logs the first failure of a run and then every twentieth, and times each renewal as the renew operation', async () => {
    jest.useFakeTimers({ now: 0 });
    const { store, leases, observer } = setup({ leaseMs: 3_000, maxHoldMs: 60_000 });
    const stored = jest.spyOn(observer, 'stored');
    const mine = activeClaim({ claimedAt: 0, leaseMs: 3_000 });
    leases.hold(mine);
    store.renewAnswer = () => Promise.reject(new Error('timeout'));
    // The retries (50 ms doubling up to a tick) and the ticks: step until the 20th and the 21st failure.
    const until = async (calls: number) => {
      for (let i = 0; i < 10_000 && store.calls.length < calls; i++) await jest.advanceTimersByTimeAsync(5);
      expect(store.calls).toHaveLength(calls);
    };
    await until(20);
    expect(log.errors).toHaveBeenCalledTimes(1);
    await until(21);
    expect(log.errors).toHaveBeenCalledTimes(2);
    // One timing per failed renewal, each as the renew operation with its error.
    expect(stored.mock.calls).toHaveLength(21);
    expect(stored.mock.calls.every(([operation, , error]) => operation === 'renew' && error instanceof Error)).toBe(true);
    store.renewAnswer = async () => true;
    stored.mockClear();
    await jest.advanceTimersByTimeAsync(1_000);
    expect(stored.mock.calls.length).toBeGreaterThan(0);
    expect(stored.mock.calls.every(([operation, , error]) => operation === 'renew' && error === undefined)).toBe(true);
    leases.unhold(mine);
    await leases.drain();
  });

  it('sends nothing, and times nothing, when every held claim has reached maxHoldMs', async () => {
    jest.useFakeTimers({ now: 0 });
    const { store, leases, observer } = setup({ leaseMs: 30, maxHoldMs: 60 });
    const stored = jest.spyOn(observer, 'stored');
    const renewAll = jest.fn(async (claims: readonly OwnedKey[]) => claims.map(() => true));
    Object.assign(store, { renewAll });
    leases.hold(activeClaim({ claimedAt: -100 }));
    await jest.advanceTimersByTimeAsync(10);
    expect(renewAll).not.toHaveBeenCalled();
    expect(stored).not.toHaveBeenCalled();
    expect(leases.size).toBe(0);
    await leases.drain();
  });

  it('is draining from the drain on and stays so after it (the interceptor answers 503 until the server has closed)', async () => {
    jest.useFakeTimers();
    const { leases } = setup({ leaseMs: 30 });
    const mine = activeClaim();
    leases.hold(mine);
    expect(leases.draining).toBe(false);
    const drained = leases.drain();
    expect(leases.draining).toBe(true);
    leases.unhold(mine);
    await drained;
    expect(leases.draining).toBe(true);
  });
});
