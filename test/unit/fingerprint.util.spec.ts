import { describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { BodyTooDeepError, canonicalJson, canonicalQuery, requestFingerprint } from '../../lib/utils/fingerprint.util.js';

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
