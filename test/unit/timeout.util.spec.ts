import { describe, expect, it, jest } from '@jest/globals';
import { calledOrAt, withTimeout } from '../../lib/shared/utils/timeout.util.js';

describe('withTimeout', () => {
  it('answers with the work when it settles first, and clears its timer', async () => {
    const clear = jest.spyOn(globalThis, 'clearTimeout');
    await expect(withTimeout(Promise.resolve(7), 10_000, () => new Error('late'))).resolves.toBe(7);
    await expect(withTimeout(Promise.reject(new Error('own')), 10_000, () => new Error('late'))).rejects.toThrow('own');
    expect(clear).toHaveBeenCalledTimes(2);
    clear.mockRestore();
  });

  it("rejects with the caller's error once the time is up, on a timer that does not hold the process", async () => {
    const set = jest.spyOn(globalThis, 'setTimeout');
    const never = new Promise<number>(() => undefined);
    await expect(withTimeout(never, 5, () => new RangeError('late'))).rejects.toThrow(RangeError);
    const timer = set.mock.results[0].value as NodeJS.Timeout;
    expect(set.mock.calls[0][1]).toBe(5);
    expect(timer.hasRef()).toBe(false);
    set.mockRestore();
  });
});

describe('calledOrAt', () => {
  it('resolves when its callback is called, and clears its timer', async () => {
    const clear = jest.spyOn(globalThis, 'clearTimeout');
    let call!: () => void;
    let done = false;
    const waiting = calledOrAt(Date.now() + 60_000, (c) => (call = c)).then(() => (done = true));
    await new Promise((r) => setImmediate(r));
    expect(done).toBe(false);
    call();
    await waiting;
    expect(clear).toHaveBeenCalledTimes(1);
    clear.mockRestore();
  });

  it('resolves at the time given when the callback is never called, at once when that time is past', async () => {
    jest.useFakeTimers({ now: 1_000_000 });
    let done = false;
    const waiting = calledOrAt(1_005_000, () => undefined).then(() => (done = true));
    await jest.advanceTimersByTimeAsync(4_999);
    expect(done).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    await waiting;
    jest.useRealTimers();
    // A time already past resolves at once.
    await calledOrAt(0, () => undefined);
  });
});
