import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { parseItem, serializeItem } from 'structured-headers';
import { storeKey, decodeKey, escapeScope, keyViolation, UNSCOPED } from '../../lib/shared/utils/key.util.js';
import { SEED } from '../support/arbitraries.js';

describe('key decoding (Structured Field String, RFC 9651 §3.3.3)', () => {
  it('unquotes and unescapes a quoted key, and takes any other key as it is', () => {
    expect(decodeKey('"8e03978e-40d5"')).toBe('8e03978e-40d5');
    expect(decodeKey('8e03978e-40d5')).toBe('8e03978e-40d5');
    expect(decodeKey('"a\\"b\\\\c"')).toBe('a"b\\c');
    expect(decodeKey('"\\""')).toBe('"');
    expect(decodeKey('""')).toBe('');
    expect(decodeKey('"a b~"')).toBe('a b~');
    expect(decodeKey('')).toBe('');
    // Only a leading quote makes a Structured Field String.
    expect(decodeKey('a"b"')).toBe('a"b"');
    expect(decodeKey('a\\b')).toBe('a\\b');
  });

  it.each([
    ['unterminated', '"abc'],
    ['a lone quote', '"'],
    ['an escaped closing quote', '"abc\\"'],
    ['a bad escape', '"a\\nb"'],
    ['a backslash at the end', '"abc\\'],
    ['parameters after it', '"abc";a=1'],
    ['anything after it', '"abc"x'],
    ['a second string', '"a""b"'],
    ['a tab', '"a\tb"'],
    ['a control character', '"a\u0001"'],
    ['DEL', '"a\u007f"'],
    ['non-ASCII', '"café"'],
  ])('refuses a malformed string: %s', (_name, value) => {
    expect(decodeKey(value)).toBeUndefined();
  });

  it('property: reads what structured-headers writes, and accepts exactly what it parses as a string without parameters', () => {
    const printable = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)) });
    fc.assert(
      fc.property(printable, (key) => {
        expect(decodeKey(serializeItem(key))).toBe(key);
      }),
      { seed: SEED, numRuns: 1000 },
    );
    const char = fc.oneof(
      fc.constantFrom('"', '\\', ';', '=', ' ', '\t', 'a', 'Z', '0', '-', '\u0000', '\u007f', 'é', ','),
      fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
    );
    // Node hands header values over trimmed; a leading quote is what makes them strings.
    const quoted = fc.array(char, { maxLength: 12 }).map((chars) => `"${chars.join('')}`.trimEnd());
    fc.assert(
      fc.property(quoted, (value) => {
        let expected: string | undefined;
        try {
          const [item, params] = parseItem(value);
          expected = typeof item === 'string' && params.size === 0 ? item : undefined;
        } catch {
          expected = undefined;
        }
        expect(decodeKey(value)).toBe(expected);
      }),
      { seed: SEED, numRuns: 5000 },
    );
  });
});

describe('key validation', () => {
  it('refuses every control character, DEL and space, naming the index', () => {
    for (let c = 0; c <= 0x20; c++) {
      expect(keyViolation('k', `ab${String.fromCharCode(c)}`, 3, 10)).toBe(
        'k has a control character, a space or an invisible character at index 2',
      );
    }
    expect(keyViolation('k', 'a\x7f', 2, 10)).toBe('k has a control character, a space or an invisible character at index 1');
  });

  // Issue 49 item 5: message and GraphQL keys took what no header can carry and no one can see.
  it('refuses C1 controls (NEL), line separators, zero-width and direction marks and the BOM, naming the index', () => {
    for (const c of [0x80, 0x85, 0x9f, 0x2028, 0x2029, 0x200b, 0x200e, 0x202e, 0x2060, 0x3000, 0xfeff]) {
      expect(keyViolation('k', `ab${String.fromCharCode(c)}c`, 4, 10)).toBe(
        'k has a control character, a space or an invisible character at index 2',
      );
    }
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
    expect(storeKey('idem:', escapeScope('acct_42'), 'tx-1')).toBe('idem:acct_42:tx-1');
    expect(storeKey('idem:', UNSCOPED, 'a:b')).toBe('idem:%:a:b');
  });

  it('maps distinct (scope, key) pairs to distinct cache keys', () => {
    const parts = ['', 'a', ':', '%', '%3A', '%25', 'a:b', 'a%3Ab', '%:', ':%', 'b', 'a:', ':b'];
    const seen = new Map<string, string>();
    for (const scope of [undefined, ...parts]) {
      for (const key of parts) {
        const k = storeKey('idem:', scope === undefined ? UNSCOPED : escapeScope(scope), key);
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
