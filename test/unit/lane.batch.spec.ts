import { describe, expect, it, jest } from '@jest/globals';
import { LaneBatch } from '../../lib/stores/shared/lane.batch.js';
import { NORMAL, PoolLanes } from '../../lib/stores/shared/pool.lanes.js';

interface Item {
  readonly key: string;
}

/** A statement sender the test answers by hand: every call is kept, with its items. */
function sender() {
  const calls: { keys: string[]; answer(): void; fail(error: Error): void }[] = [];
  const send = (items: readonly Item[]) =>
    new Promise<string[]>((resolve, reject) => {
      calls.push({
        keys: items.map((i) => i.key),
        answer: () => resolve(items.map((i) => `answer:${i.key}`)),
        fail: reject,
      });
    });
  return { calls, send };
}

const turn = () => new Promise((r) => setImmediate(r));

/** A pool of two connections: claims (the normal lane) get one of them. */
function batchOn(max = 64, waitMs = 60_000) {
  const lanes = new PoolLanes(2, waitMs);
  const { calls, send } = sender();
  return { lanes, calls, batch: new LaneBatch<Item, string>(() => lanes, NORMAL, max, send) };
}

describe('LaneBatch', () => {
  it('sends an item alone at once when its lane is free: no wait for the turn to end', async () => {
    const { calls, batch } = batchOn();
    const answer = batch.add({ key: 'a' });
    expect(calls.map((c) => c.keys)).toEqual([['a']]);
    calls[0].answer();
    expect(await answer).toBe('answer:a');
  });

  it('items asked while the batch waits for its lane go in one statement, each answered with its own', async () => {
    const { calls, batch } = batchOn();
    const first = batch.add({ key: 'a' });
    const waiting = ['b', 'c', 'd'].map((key) => batch.add({ key }));
    expect(calls).toHaveLength(1);
    calls[0].answer();
    await first;
    await turn();
    expect(calls.map((c) => c.keys)).toEqual([['a'], ['b', 'c', 'd']]);
    calls[1].answer();
    expect(await Promise.all(waiting)).toEqual(['answer:b', 'answer:c', 'answer:d']);
    await turn();
    expect(calls).toHaveLength(2); // nothing left: no empty statement follows
  });

  it('carries at most max items per statement, in the order asked, a key more than once too; the rest wait for the next', async () => {
    const { calls, batch } = batchOn(3);
    const all = [batch.add({ key: 'a' })];
    for (const key of ['b', 'c', 'b', 'd', 'e']) all.push(batch.add({ key }));
    for (let i = 0; i < 3; i++) {
      calls[i].answer();
      await turn();
    }
    expect(calls.map((c) => c.keys)).toEqual([['a'], ['b', 'c', 'b'], ['d', 'e']]);
    expect(await Promise.all(all)).toEqual(['a', 'b', 'c', 'b', 'd', 'e'].map((k) => `answer:${k}`));
  });

  it('a failed statement fails every item in it, and only those', async () => {
    const { calls, batch } = batchOn();
    const first = batch.add({ key: 'a' });
    const failing = ['b', 'c'].map((key) => batch.add({ key }));
    calls[0].answer();
    await first;
    await turn();
    const later = batch.add({ key: 'd' });
    calls[1].fail(new Error('statement timeout'));
    const outcomes = await Promise.allSettled(failing);
    expect(outcomes.map((o) => o.status === 'rejected' && (o.reason as Error).message)).toEqual([
      'statement timeout',
      'statement timeout',
    ]);
    await turn();
    expect(calls[2].keys).toEqual(['d']);
    calls[2].answer();
    expect(await later).toBe('answer:d');
  });

  it('a batch whose wait for its lane runs out fails the items waiting in it; the next item starts a new one', async () => {
    jest.useFakeTimers();
    try {
      const { calls, batch } = batchOn(64, 1000);
      const first = batch.add({ key: 'a' });
      const waiting = ['b', 'c'].map((key) => batch.add({ key }));
      const settled = Promise.allSettled(waiting);
      jest.advanceTimersByTime(1000);
      const outcomes = await settled;
      expect(outcomes.map((o) => o.status === 'rejected' && (o.reason as Error).message)).toEqual([
        'no PostgreSQL connection was free for the store within 1000 ms',
        'no PostgreSQL connection was free for the store within 1000 ms',
      ]);
      const next = batch.add({ key: 'd' });
      calls[0].answer();
      await first;
      await Promise.resolve();
      await Promise.resolve();
      expect(calls.map((c) => c.keys)).toEqual([['a'], ['d']]);
      calls[1].answer();
      expect(await next).toBe('answer:d');
    } finally {
      jest.useRealTimers();
    }
  });
});
