import { describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import {
  BodyTooDeepError,
  canonicalJson,
  canonicalQuery,
  requestFingerprint,
  sortedForStringify,
} from '../../lib/shared/utils/fingerprint.util.js';
import { CANONICAL_TAG, RAW_TAG, tagged, tagOf } from '../../lib/shared/utils/fingerprint-tag.util.js';
import { SEED } from '../support/arbitraries.js';

describe('canonical query', () => {
  it("sorts names and keeps the order of a repeated name's values", () => {
    expect(canonicalQuery('b=2&a=1')).toBe(canonicalQuery('a=1&b=2'));
    expect(canonicalQuery('tag=a&x=1&tag=b')).toBe('tag=a&tag=b&x=1');
    expect(canonicalQuery('tag=a&tag=b')).not.toBe(canonicalQuery('tag=b&tag=a'));
    expect(canonicalQuery('')).toBe('');
    expect(canonicalQuery('=')).toBe('=');
  });

  it('normalises percent-encoding, so an encoded and a plain value agree', () => {
    expect(canonicalQuery('a=%41')).toBe(canonicalQuery('a=A'));
    expect(canonicalQuery('a=1%262')).not.toBe(canonicalQuery('a=1&2'));
  });
});

describe('canonical body', () => {
  it('sorts object keys at every depth and keeps array order', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, 1], c: null } })).toBe('{"a":{"c":null,"d":[3,1]},"b":1}');
    expect(canonicalJson({ when: new Date(0), n: 1n })).toBe('{"n":"1","when":"1970-01-01T00:00:00.000Z"}');
    expect(canonicalJson([{ y: 1, x: 2 }])).toBe('[{"x":2,"y":1}]');
    // An own "__proto__" key (JSON.parse makes one) is data, not the prototype: it stays in.
    expect(canonicalJson(JSON.parse('{"b":1,"__proto__":{"admin":true}}'))).toBe('{"__proto__":{"admin":true},"b":1}');
    expect(canonicalJson(JSON.parse('{"__proto__":1}'))).not.toBe(canonicalJson(JSON.parse('{"__proto__":2}')));
    // Values JSON has no text for read as null, as JSON.stringify reads them inside arrays.
    expect(canonicalJson(Symbol('s'))).toBe('null');
    expect(canonicalJson(() => 1)).toBe('null');
  });

  it('writes what JSON.stringify writes for scalars', () => {
    for (const v of ['q"u\\ote\u2028', 1.5, -0, 1e21, true, false, null, '\ud800']) {
      expect(canonicalJson(v)).toBe(JSON.stringify(v));
    }
    expect(canonicalJson({ u: undefined, n: NaN })).toBe('{"n":null}');
  });

  it('refuses nesting too deep to serialise with its own error, not a crash', () => {
    let deep: unknown = 0;
    for (let i = 0; i < 1_000_000; i++) deep = { d: deep };
    expect(() => canonicalJson(deep)).toThrow(BodyTooDeepError);
    let fine: unknown = 0;
    for (let i = 0; i < 1000; i++) fine = [fine];
    expect(canonicalJson(fine)).toBe(`${'['.repeat(1000)}0${']'.repeat(1000)}`);
  });

  it('lets other serialisation errors through as they are', () => {
    const body = {
      toJSON: () => {
        throw new TypeError('not serialisable');
      },
    };
    expect(() => canonicalJson(body)).toThrow(TypeError);
  });

  it('orders integer-like keys canonically too', () => {
    expect(canonicalJson({ b: 1, 10: 'x', a: 2, 2: 'y' })).toBe(canonicalJson({ 2: 'y', a: 2, 10: 'x', b: 1 }));
  });
});

describe('request fingerprint', () => {
  const fp = (method: string, url: string, body: unknown, handler = 'Pay.create') =>
    requestFingerprint(method, url, body, handler);
  const sha = (input: string | Buffer) => createHash('sha256').update(input).digest('base64url');

  it('is SHA-256 over the tagged, length-delimited parts, as specified', () => {
    expect(fp('POST', '/a?b=1&a=2', { y: 1, x: [true] })).toBe(sha('h10:Pay.createm4:POSTp2:/aq7:a=2&b=1j18:{"x":[true],"y":1}'));
    expect(fp('PUT', '/pay', undefined, 'A.b')).toBe(sha('h3:A.bm3:PUTp4:/payq0:n'));
    expect(fp('PUT', '/pay', null, 'A.b')).toBe(sha('h3:A.bm3:PUTp4:/payq0:n'));
    expect(fp('POST', '/?', 'text', 'A.b')).toBe(sha('h3:A.bm4:POSTp1:/q0:s4:text'));
    expect(fp('POST', '/b', Buffer.from([1, 2]), 'A.b')).toBe(
      sha(Buffer.concat([Buffer.from('h3:A.bm4:POSTp2:/bq0:b2:'), Buffer.from([1, 2])])),
    );
  });

  it('is equal for a reordered query and reordered body keys', () => {
    expect(fp('POST', '/p?a=1&b=2', { x: 1, y: 2 })).toBe(fp('POST', '/p?b=2&a=1', { y: 2, x: 1 }));
  });

  it('differs in each of handler, method, path, query and body', () => {
    const base = fp('POST', '/p?a=1', { x: 1 });
    // The same path routed to another handler (header versioning: V1.create, V2.create).
    expect(fp('POST', '/p?a=1', { x: 1 }, 'PayV2.create')).not.toBe(base);
    expect(fp('PUT', '/p?a=1', { x: 1 })).not.toBe(base);
    expect(fp('POST', '/q?a=1', { x: 1 })).not.toBe(base);
    expect(fp('POST', '/p?a=2', { x: 1 })).not.toBe(base);
    expect(fp('POST', '/p?a=1', { x: 2 })).not.toBe(base);
    expect(fp('POST', '/p?a=1', undefined)).not.toBe(base);
  });

  it('cannot be collided by moving bytes between parts', () => {
    // Plain concatenation would make these equal: "POST" + "/ab" == "POS" + "T/ab", and so on.
    expect(fp('POST', '/ab', undefined)).not.toBe(fp('POS', 'T/ab', undefined));
    expect(fp('POST', '/ab', undefined, 'A.b')).not.toBe(fp('.bPOST', '/ab', undefined, 'A'));
    expect(fp('POST', '/a?b=1', 'x')).not.toBe(fp('POST', '/a', 'b=1x'));
    expect(fp('POST', '/a', '')).not.toBe(fp('POST', '/a', undefined));
    expect(fp('POST', '/a', 'null')).not.toBe(fp('POST', '/a', null));
    expect(fp('POST', '/a', '{}')).not.toBe(fp('POST', '/a', {}));
    expect(fp('POST', '/a', Buffer.from('{}'))).not.toBe(fp('POST', '/a', '{}'));
  });
});

describe('canonical body, the fast form', () => {
  // The general form, as it was before the fast one: every stored fingerprint was made this way.
  const reference = (value: unknown) =>
    JSON.stringify(value, (_k, v: unknown) => {
      if (typeof v === 'bigint') return v.toString();
      if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
      const copy = Object.create(null) as Record<string, unknown>;
      for (const k of Object.keys(v).sort()) copy[k] = (v as Record<string, unknown>)[k];
      return copy;
    }) ?? 'null';

  it('reuses what is in order already and copies only unsorted objects and their ancestors', () => {
    const inOrder = { a: [1, { x: null, y: 'z' }], b: { c: true } };
    expect(sortedForStringify(inOrder)).toBe(inOrder);
    const list = [{ a: 1 }, { b: 2 }];
    expect(sortedForStringify(list)).toBe(list);
    const kept = { p: 1, q: 2 };
    const body = { b: kept, a: [kept, { z: 1, y: 2 }] };
    const out = sortedForStringify(body) as { a: unknown[]; b: unknown };
    expect(Object.keys(out)).toEqual(['a', 'b']);
    expect(out.b).toBe(kept);
    expect(out.a).not.toBe(body.a);
    expect(out.a[0]).toBe(kept);
    expect(Object.keys(out.a[1] as object)).toEqual(['y', 'z']);
    expect(Object.keys(body)).toEqual(['b', 'a']);
    expect(Object.keys(body.a[1])).toEqual(['z', 'y']);
    // A sorted object whose later value needs a copy keeps the values before it.
    const later = sortedForStringify({ a: 1, b: 'x', c: { e: 1, d: 2 } }) as Record<string, unknown>;
    expect(later).toEqual({ a: 1, b: 'x', c: { d: 2, e: 1 } });
    expect(Object.keys(later)).toEqual(['a', 'b', 'c']);
    // Integer-like keys: V8 writes them first and ascending in any object, as the general form does.
    expect(JSON.stringify(sortedForStringify({ b: 1, 10: 'x', a: 2, 2: 'y' }))).toBe('{"2":"y","10":"x","a":2,"b":1}');
    const indices = { 1: 'a', 2: 'b', c: 3 };
    expect(sortedForStringify(indices)).toBe(indices);
    const nullProto = Object.assign(Object.create(null) as object, { b: 1, a: 2 });
    expect(Object.keys(sortedForStringify(nullProto) as object)).toEqual(['a', 'b']);
  });

  it('leaves to the general form what it alone writes exactly, at any depth', () => {
    const general: unknown[] = [
      { toJSON: () => 1 },
      Object.assign([1], { toJSON: () => 2 }),
      new Date(0),
      Object.create({ inherited: 1 }) as object,
      { n: 1n },
      [1, 2n],
      JSON.parse('{"a":1,"__proto__":2}'),
      { a: [{ b: { when: new Date(0) } }] },
      [{ b: 1 }, new Map()],
    ];
    for (const body of general) {
      expect(sortedForStringify(body as object)).toBeUndefined();
      expect(canonicalJson(body)).toBe(reference(body));
    }
    expect(() =>
      sortedForStringify({
        get a() {
          throw new TypeError('getter');
        },
      }),
    ).toThrow(TypeError);
    // What JSON has no text for reads as null in the general form too.
    expect(canonicalJson({ toJSON: () => undefined })).toBe('null');
  });

  it('property: writes exactly what the general form writes, for any JSON body and any key order', () => {
    const key = fc.oneof(fc.string({ maxLength: 4 }), fc.constantFrom('__proto__', '0', '10', '2', 'a', 'B', 'ä', '-1', '01'));
    const body = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        fc.oneof(fc.string(), fc.double(), fc.boolean(), fc.constant(null), fc.integer()),
        fc.array(tie('value'), { maxLength: 4 }),
        fc.dictionary(key, tie('value'), { maxKeys: 5 }),
      ),
    })).value;
    fc.assert(
      fc.property(body, (value) => {
        const parsed: unknown = JSON.parse(JSON.stringify(value) ?? 'null');
        expect(canonicalJson(parsed)).toBe(reference(parsed));
        expect(canonicalJson(value)).toBe(reference(value));
      }),
      { seed: SEED, numRuns: 2000 },
    );
  });
});

describe('fingerprint tags', () => {
  it('stores canonical fingerprints untagged and others as "<tag>:<hash>"; reads the tag back', () => {
    const hash = requestFingerprint('POST', '/p', { a: 1 }, 'A.b');
    expect(tagged(CANONICAL_TAG, hash)).toBe(hash);
    expect(tagged(RAW_TAG, hash)).toBe(`r1:${hash}`);
    expect(tagOf(hash)).toBe(CANONICAL_TAG);
    expect(tagOf(`r1:${hash}`)).toBe('r1');
    // A tag with a colon of its own (a newer format) is all but the hash.
    expect(tagOf(`x:y:${hash}`)).toBe('x:y');
    expect(tagOf(':')).toBe('');
  });
});
