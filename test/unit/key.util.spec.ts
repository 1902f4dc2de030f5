import { describe, expect, it } from '@jest/globals';
import { cacheKey, escapeScope, keyViolation, UNSCOPED } from '../../lib/utils/key.util.js';

describe('key validation', () => {
  it('refuses every control character, DEL and space, naming the index', () => {
    for (let c = 0; c <= 0x20; c++) {
      expect(keyViolation('k', `ab${String.fromCharCode(c)}`, 3, 10)).toBe('k has a control character or space at index 2');
    }
    expect(keyViolation('k', 'a\x7f', 2, 10)).toBe('k has a control character or space at index 1');
  });

  it('accepts printable ASCII and non-ASCII', () => {
    let printable = '';
    for (let c = 0x21; c < 0x7f; c++) printable += String.fromCharCode(c);
    expect(keyViolation('k', printable, printable.length, 255)).toBeUndefined();
    expect(keyViolation('k', 'ключ-ü-\u00a0x', 10, 255)).toBeUndefined();
  });

  it('checks the length first, at exactly the limit', () => {
    expect(keyViolation('k', 'a'.repeat(5), 5, 5)).toBeUndefined();
    expect(keyViolation('k', 'a a a', 6, 5)).toBe('k exceeds 5 characters');
  });
});

describe('cache key', () => {
  it('keeps a plain scope and the key literal', () => {
    expect(cacheKey('idem:', escapeScope('acct_42'), 'tx-1')).toBe('idem:acct_42:tx-1');
    expect(cacheKey('idem:', UNSCOPED, 'a:b')).toBe('idem:%:a:b');
  });

  it('maps distinct (scope, key) pairs to distinct cache keys', () => {
    const parts = ['', 'a', ':', '%', '%3A', '%25', 'a:b', 'a%3Ab', '%:', ':%', 'b', 'a:', ':b'];
    const seen = new Map<string, string>();
    for (const scope of [undefined, ...parts]) {
      for (const key of parts) {
        const k = cacheKey('idem:', scope === undefined ? UNSCOPED : escapeScope(scope), key);
        const pair = JSON.stringify([scope ?? null, key]);
        expect(seen.get(k) ?? pair).toBe(pair);
        seen.set(k, pair);
      }
    }
    expect(seen.size).toBe((parts.length + 1) * parts.length);
  });

  it('no escaped scope is the unscoped marker', () => {
    expect(escapeScope('%')).toBe('%25');
    expect(escapeScope('a:%b')).toBe('a%3A%25b');
  });
});
