import { describe, expect, it, jest } from '@jest/globals';
import { TurnBatch } from '../../lib/stores/shared/turn.batch.js';

/** A command sender the test answers by hand: every call is kept, with its items. */
function sender() {
  const calls: { items: string[]; answer(answers?: (string | Error)[]): void; fail(error: Error): void }[] = [];
  const send = (items: readonly string[]) =>
    new Promise<(string | Error)[]>((resolve, reject) => {
      calls.push({ items: [...items], answer: (answers) => resolve(answers ?? items.map((i) => `answer:${i}`)), fail: reject });
    });
  return { calls, send };
}

const turn = () => new Promise((r) => setImmediate(r));

describe('TurnBatch', () => {
  it("sends nothing until the turn's I/O is read, then the turn's items as one command, in the order asked", async () => {
    const { calls, send } = sender();
    const batch = new TurnBatch<string, string>(64, send);
    const answers = ['a', 'b', 'a'].map((item) => batch.add(item));
    // Still in the turn that asked: nothing has gone.
    await Promise.resolve();
    expect(calls).toEqual([]);
    await turn();
    expect(calls.map((c) => c.items)).toEqual([['a', 'b', 'a']]);
    calls[0].answer(['1', '2', '3']);
    expect(await Promise.all(answers)).toEqual(['1', '2', '3']);
  });

  it('sends a lone item alone, and the next turn starts a new command', async () => {
    const { calls, send } = sender();
    const batch = new TurnBatch<string, string>(64, send);
    const first = batch.add('a');
    await turn();
    const second = batch.add('b');
    await turn();
    expect(calls.map((c) => c.items)).toEqual([['a'], ['b']]);
    calls.forEach((c) => c.answer());
    expect([await first, await second]).toEqual(['answer:a', 'answer:b']);
  });

  it('carries at most `max` items per command: more go as further commands of the same turn', async () => {
    const { calls, send } = sender();
    const batch = new TurnBatch<string, string>(2, send);
    const answers = ['a', 'b', 'c', 'd', 'e'].map((item) => batch.add(item));
    await turn();
    expect(calls.map((c) => c.items)).toEqual([['a', 'b'], ['c', 'd'], ['e']]);
    calls.forEach((c) => c.answer());
    expect(await Promise.all(answers)).toEqual(['answer:a', 'answer:b', 'answer:c', 'answer:d', 'answer:e']);
    // A multiple of `max`: no empty command after the last full one.
    ['f', 'g', 'h', 'i'].forEach((item) => void batch.add(item));
    await turn();
    expect(calls.slice(3).map((c) => c.items)).toEqual([
      ['f', 'g'],
      ['h', 'i'],
    ]);
  });

  it('a failed command fails its items only; an Error answered for one item fails that item alone', async () => {
    const { calls, send } = sender();
    const batch = new TurnBatch<string, string>(2, send);
    const answers = ['a', 'b', 'c', 'd'].map((item) => batch.add(item).catch((e: Error) => `failed: ${e.message}`));
    await turn();
    calls[0].fail(new Error('down'));
    calls[1].answer(['3', new Error('WRONGTYPE')]);
    expect(await Promise.all(answers)).toEqual(['failed: down', 'failed: down', '3', 'failed: WRONGTYPE']);
  });

  it("is not held back by a test's fake timers", async () => {
    jest.useFakeTimers();
    try {
      const { calls, send } = sender();
      const batch = new TurnBatch<string, string>(64, send);
      const answer = batch.add('a');
      await new Promise((r) => jest.requireActual<typeof import('node:timers')>('node:timers').setImmediate(r));
      expect(calls.map((c) => c.items)).toEqual([['a']]);
      calls[0].answer();
      expect(await answer).toBe('answer:a');
    } finally {
      jest.useRealTimers();
    }
  });
});
