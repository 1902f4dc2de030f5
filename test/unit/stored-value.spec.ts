import { describe, expect, it } from '@jest/globals';
import { IdempotencyException } from '../../lib/index.js';
import { isRefusal, replayedValue, storedValue } from '../../lib/core/values/stored-value.js';

class Order {
  self?: Order;
}

/** A log that keeps what it is told. */
function log() {
  const lines: string[] = [];
  return { lines, warn: (l: string) => void lines.push(`warn ${l}`), error: (l: string) => void lines.push(`error ${l}`) };
}

const refusalOf = (response: ReturnType<typeof storedValue>) => {
  try {
    replayedValue(response);
  } catch (err) {
    return err as IdempotencyException;
  }
  throw new Error('not a refusal');
};

describe('storedValue and replayedValue', () => {
  it('stores JSON (undefined as an empty body) and reads it back; up to maxBytes exactly', () => {
    const l = log();
    const value = storedValue({ a: 1 }, 'R.m', 7, l);
    expect(value).toEqual({ status: 200, headers: { 'content-type': 'application/json' }, body: Buffer.from('{"a":1}') });
    expect(isRefusal(value)).toBe(false);
    expect(replayedValue(value)).toEqual({ a: 1 });
    expect(replayedValue(storedValue(undefined, 'R.m', 7, l))).toBeUndefined();
    expect(l.lines).toEqual([]);
  });

  it('a value over maxBytes is a response-too-large refusal, logged as a warning', () => {
    const l = log();
    const stored = storedValue({ a: 12 }, 'R.m', 7, l);
    expect(isRefusal(stored)).toBe(true);
    const err = refusalOf(stored);
    expect([err.code, err.getStatus(), err.reason]).toEqual([
      'response-too-large',
      500,
      'the request with this key was processed, but its response was over 7 bytes and was not kept, so it cannot be sent again',
    ]);
    expect(l.lines).toEqual([
      'warn R.m: response of 8 bytes is over maxResponseBytes (7): the key keeps a response-too-large record instead',
    ]);
  });

  it('a value JSON cannot hold is a result-unstorable refusal naming its type, logged once at error level with the first line of why', () => {
    const l = log();
    const cyclic = new Order();
    cyclic.self = cyclic;
    const bare = Object.assign(Object.create(null) as object, { n: 1n });
    const nameless = Object.assign(Object.create({ constructor: { name: '' } }) as object, { n: 1n });
    const types = [cyclic, { n: 1n }, 1n, bare, nameless].map((v) => {
      const err = refusalOf(storedValue(v, 'R.m', 1_000, l));
      expect([err.code, err.getStatus()]).toEqual(['result-unstorable', 500]);
      return /\((.*)\)/.exec(err.reason)![1];
    });
    expect(types).toEqual(['Order', 'Object', 'bigint', 'object', 'object']);
    expect(l.lines[0]).toBe(
      'error R.m: its result (Order) cannot be stored as JSON (Converting circular structure to JSON); the key keeps a result-unstorable record, so a duplicate is refused with that code and never runs it again. Return plain JSON values (a BigInt as a string, no cycles)',
    );
    expect(l.lines).toHaveLength(5);
  });
});
