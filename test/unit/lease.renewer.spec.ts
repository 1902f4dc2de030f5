import { describe, expect, it, jest } from '@jest/globals';
import { spyOnLogger } from '../support/logger.js';
import { createProtocol as setup } from '../support/protocol.js';
import { activeClaim } from '../support/claims.js';

describe('LeaseRenewer', () => {
  const log = spyOnLogger();
  const claim = activeClaim();

  it('renews every held claim each third of the lease, with one timer, until unheld', async () => {
    jest.useFakeTimers();
    const { store, leases } = setup({ leaseMs: 10 });
    const other = { ...claim, cacheKey: 'idem:%:k2', owner: 'you' };
    leases.hold(claim);
    leases.hold(other);
    expect(jest.getTimerCount()).toBe(1);
    jest.advanceTimersByTime(2);
    expect(store.calls).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(store.calls).toEqual([
      ['renew', 'idem:%:k', 'me', 10],
      ['renew', 'idem:%:k2', 'you', 10],
    ]);
    leases.unhold(claim);
    store.calls.length = 0;
    jest.advanceTimersByTime(3);
    expect(store.calls).toEqual([['renew', 'idem:%:k2', 'you', 10]]);
    leases.unhold(other);
    store.calls.length = 0;
    jest.advanceTimersByTime(30);
    expect(store.calls).toEqual([]);
    expect(jest.getTimerCount()).toBe(1);
    leases.onModuleDestroy();
    expect(jest.getTimerCount()).toBe(0);
  });

  it('stops renewing a claim held for maxHoldMs, with a warning naming the route', async () => {
    jest.useFakeTimers({ now: 1_000 });
    const { store, leases } = setup({ leaseMs: 30, maxHoldMs: 60 });
    const held = { ...claim, claimedAt: 1_000 };
    leases.hold(held);
    jest.advanceTimersByTime(50);
    expect(store.calls).toHaveLength(5);
    expect(log.warnings).not.toHaveBeenCalled();
    jest.advanceTimersByTime(10);
    expect(store.calls).toHaveLength(5);
    expect(log.warnings).toHaveBeenCalledWith(
      'Pay.create: the handler has held its key for 60 ms (maxHoldMs) without finishing; the lease is no longer renewed and lapses, after which a retry runs the handler again',
    );
    expect((log.warnings.mock.contexts[0] as { context?: string }).context).toBe('Idempotency');
    jest.advanceTimersByTime(100);
    expect(store.calls).toHaveLength(5);
    expect(log.warnings).toHaveBeenCalledTimes(1);
    leases.onModuleDestroy();
  });

  it('logs a lost lease and a failed renewal', async () => {
    jest.useFakeTimers();
    const { store, leases } = setup({ leaseMs: 3 });
    leases.hold(claim);
    store.renewAnswer = async () => false;
    await jest.advanceTimersByTimeAsync(1);
    expect(log.warnings).toHaveBeenCalledWith('Pay.create: lease lost while the handler was still running');
    expect(log.errors).not.toHaveBeenCalled();
    log.warnings.mockClear();
    store.renewAnswer = () => Promise.reject(new Error('timeout'));
    await jest.advanceTimersByTimeAsync(1);
    expect(log.errors).toHaveBeenCalledWith('Pay.create: lease renewal failed: timeout');
    expect(log.warnings).not.toHaveBeenCalled();
    store.renewAnswer = async () => true;
    log.errors.mockClear();
    await jest.advanceTimersByTimeAsync(1);
    expect(log.warnings).not.toHaveBeenCalled();
    expect(log.errors).not.toHaveBeenCalled();
    leases.onModuleDestroy();
  });

  it('keeps its timer from holding the process open, and starts a new one after destroy', () => {
    const { leases } = setup({ leaseMs: 60_000 });
    leases.hold(claim);
    const timer = (leases as unknown as { timer: NodeJS.Timeout }).timer;
    expect(timer.hasRef()).toBe(false);
    leases.onModuleDestroy();
    expect((leases as unknown as { timer?: NodeJS.Timeout }).timer).toBeUndefined();
    leases.hold(claim);
    const next = (leases as unknown as { timer: NodeJS.Timeout }).timer;
    expect(next).toBeDefined();
    expect(next).not.toBe(timer);
    leases.onModuleDestroy();
  });

  it('forgets held claims on destroy', async () => {
    jest.useFakeTimers();
    const { store, leases } = setup({ leaseMs: 3 });
    leases.hold(claim);
    leases.onModuleDestroy();
    leases.hold({ ...claim, owner: 'new' });
    jest.advanceTimersByTime(1);
    expect(store.calls).toEqual([['renew', 'idem:%:k', 'new', 3]]);
    leases.onModuleDestroy();
  });
});
