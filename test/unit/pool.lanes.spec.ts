import { describe, expect, it, jest } from '@jest/globals';
import { NORMAL, PoolLanes, RENEWAL, URGENT } from '../../lib/stores/shared/pool.lanes.js';

/** Work that finishes when the test says so, recording when it started. */
function held(log: string[], name: string) {
  let finish!: () => void;
  const done = new Promise<void>((r) => (finish = r));
  return { work: () => (log.push(name), done.then(() => name)), finish };
}

const turn = () => new Promise((r) => setImmediate(r));

describe('PoolLanes', () => {
  it('hands the pool at most its size, keeps one connection from claims, and starts renewals, then commits, before claims', async () => {
    const lanes = new PoolLanes(2, 60_000);
    const log: string[] = [];
    const c1 = held(log, 'claim-1');
    const c2 = held(log, 'claim-2');
    const c3 = held(log, 'claim-3');
    const commit = held(log, 'commit');
    const renewal = held(log, 'renewal');
    const p1 = lanes.run(NORMAL, c1.work);
    const p2 = lanes.run(NORMAL, c2.work);
    const p3 = lanes.run(NORMAL, c3.work);
    // One of the two connections is kept from claims: a commit starts at once.
    const pc = lanes.run(URGENT, commit.work);
    expect(log).toEqual(['claim-1', 'commit']);
    const pr = lanes.run(RENEWAL, renewal.work);
    expect(log).toEqual(['claim-1', 'commit']);
    c1.finish();
    await p1;
    await turn();
    // The renewal waited at the front: it goes before the waiting claims.
    expect(log).toEqual(['claim-1', 'commit', 'renewal']);
    commit.finish();
    renewal.finish();
    await Promise.all([pc, pr]);
    await turn();
    expect(log).toEqual(['claim-1', 'commit', 'renewal', 'claim-2']);
    c2.finish();
    await p2;
    await turn();
    expect(log.at(-1)).toBe('claim-3');
    c3.finish();
    await expect(p3).resolves.toBe('claim-3');
  });

  it('a pool of one still takes claims, one at a time, and puts urgent work first', async () => {
    const lanes = new PoolLanes(1, 60_000);
    const log: string[] = [];
    const a = held(log, 'claim-a');
    const b = held(log, 'claim-b');
    const u = held(log, 'commit');
    const pa = lanes.run(NORMAL, a.work);
    const pb = lanes.run(NORMAL, b.work);
    const pu = lanes.run(URGENT, u.work);
    expect(log).toEqual(['claim-a']);
    a.finish();
    await pa;
    await turn();
    expect(log).toEqual(['claim-a', 'commit']);
    u.finish();
    await pu;
    await turn();
    expect(log).toEqual(['claim-a', 'commit', 'claim-b']);
    b.finish();
    await pb;
  });

  it('a claim that waits past waitMs is refused (503 upstream); urgent work waits its turn; a failure frees the connection', async () => {
    jest.useFakeTimers();
    try {
      const lanes = new PoolLanes(1, 1_000);
      const log: string[] = [];
      const busy = held(log, 'busy');
      const pBusy = lanes.run(URGENT, busy.work);
      const late = lanes.run(NORMAL, async () => 'never').catch((err: Error) => err.message);
      const urgent = lanes.run(URGENT, async () => 'urgent');
      await jest.advanceTimersByTimeAsync(1_000);
      await expect(late).resolves.toBe('no PostgreSQL connection was free for the store within 1000 ms');
      busy.finish();
      await pBusy;
      await expect(urgent).resolves.toBe('urgent');
      await expect(lanes.run(NORMAL, () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
      await expect(lanes.run(NORMAL, async () => 'after')).resolves.toBe('after');
    } finally {
      jest.useRealTimers();
    }
  });
  it('never starts a claim that gave up, and never refuses one that started in time', async () => {
    jest.useFakeTimers();
    try {
      const lanes = new PoolLanes(1, 1_000);
      const log: string[] = [];
      // A claim refused with 503 whose statement ran later would hold a key its client was told is free.
      const busy = held(log, 'busy');
      const pBusy = lanes.run(URGENT, busy.work);
      const gaveUp = lanes.run(NORMAL, async () => void log.push('gave up')).catch((err: Error) => err.message);
      await jest.advanceTimersByTimeAsync(1_000);
      await expect(gaveUp).resolves.toMatch(/no PostgreSQL connection was free/);
      busy.finish();
      await pBusy;
      await jest.advanceTimersByTimeAsync(0);
      expect(log).toEqual(['busy']);
      // Admitted after 500 ms of its 1,000, its statement takes another 1,000: it is not refused midway.
      const busyAgain = held(log, 'busy again');
      const pAgain = lanes.run(URGENT, busyAgain.work);
      const slow = held(log, 'slow claim');
      const pSlow = lanes.run(NORMAL, slow.work);
      await jest.advanceTimersByTimeAsync(500);
      busyAgain.finish();
      await pAgain;
      await jest.advanceTimersByTimeAsync(1_000);
      expect(log).toEqual(['busy', 'busy again', 'slow claim']);
      slow.finish();
      await expect(pSlow).resolves.toBe('slow claim');
    } finally {
      jest.useRealTimers();
    }
  });
});
