import { describe, expect, it } from '@jest/globals';
import { lossyPart } from '../../lib/core/values/lossy-value.js';

class Order {
  constructor(readonly id: string) {}
}

describe('lossyPart', () => {
  it('names the first part a duplicate reads back as something else, anywhere in the value', () => {
    expect(lossyPart({ at: new Date(0) })).toBe('a Date (read back as its string)');
    expect(lossyPart([1, { deep: { deeper: new Map() } }])).toBe('a Map (read back as {})');
    expect(lossyPart({ s: new Set([1]) })).toBe('a Set (read back as {})');
    expect(lossyPart({ b: Buffer.from('x') })).toBe("a Buffer (read back as { type: 'Buffer', data })");
    expect(lossyPart({ n: NaN })).toBe('NaN (read back as null)');
    expect(lossyPart({ n: -Infinity })).toBe('-Infinity (read back as null)');
    expect(lossyPart(new Order('o-1'))).toBe('an instance of Order (read back as a plain object)');
  });

  it('plain data (and null prototypes, arrays, strings, finite numbers, booleans, null) comes back the same', () => {
    expect(lossyPart({ id: 'o-1', amount: 5, ok: true, none: null, list: [1, 'a', { x: 1 }] })).toBeUndefined();
    expect(lossyPart(Object.assign(Object.create(null) as object, { a: 1 }))).toBeUndefined();
    expect(lossyPart(undefined)).toBeUndefined();
    expect(lossyPart('text')).toBeUndefined();
  });

  it('looks only so deep and so wide: a warning, bounded for any value', () => {
    let deep: Record<string, unknown> = { at: new Date(0) };
    for (let i = 0; i < 8; i++) deep = { next: deep };
    expect(lossyPart(deep)).toBeUndefined();
    expect(lossyPart({ next: { at: new Date(0) } })).toBe('a Date (read back as its string)');
    const wide = Array.from({ length: 600 }, () => 1) as unknown[];
    wide.unshift(new Date(0));
    expect(lossyPart(wide)).toBeUndefined();
  });
});
