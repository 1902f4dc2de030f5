import { describe, expect, it } from '@jest/globals';
import { jsonbSafe } from '../../lib/stores/postgres/postgres.jsonb.js';

describe('jsonbSafe', () => {
  it('hands back JSON jsonb takes as it is, the same string', () => {
    for (const json of ['{"a":"\\u001f","b":[1,"😀"]}', '"\\\\ud7ff"', 'null', '"\\u00e9"']) expect(jsonbSafe(json)).toBe(json);
  });

  it('replaces NUL and lone surrogates, in values and keys, at any depth, with U+FFFD; a pair stays', () => {
    const value = { 'k\0': ['a\0b', { deep: '\ud800x' }], lone: 'x\udc00', pair: '\ud83d\ude00', n: 1, t: true, z: null };
    expect(JSON.parse(jsonbSafe(JSON.stringify(value)))).toEqual({
      'k\uFFFD': ['a\uFFFDb', { deep: '\uFFFDx' }],
      lone: 'x\uFFFD',
      pair: '😀',
      n: 1,
      t: true,
      z: null,
    });
    expect(jsonbSafe(JSON.stringify('\ud800\ud800\udc00'))).toBe(JSON.stringify('\uFFFD\ud800\udc00'));
    expect(jsonbSafe(JSON.stringify('\udbff'))).toBe('"\uFFFD"');
    expect(jsonbSafe(JSON.stringify('\udfff'))).toBe('"\uFFFD"');
  });

  it('an escaped backslash before u0000 is parsed again, and comes back the same', () => {
    const json = JSON.stringify('\\u0000 \\uD800');
    expect(jsonbSafe(json)).toBe(json);
  });
});
