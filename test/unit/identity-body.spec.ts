import { describe, expect, it } from '@jest/globals';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { identityOf } from '../../lib/transports/http/identity-body.js';
import type { StoredResponse } from '../../lib/stores/index.js';

const plain = Buffer.from('{"a":1}');
const of = (coding: string | string[] | undefined, body: Buffer): StoredResponse => ({
  status: 201,
  headers: coding === undefined ? { vary: 'accept-encoding' } : { 'content-encoding': coding, vary: 'accept-encoding' },
  body,
});

describe('identityOf', () => {
  it.each([
    ['gzip', gzipSync(plain)],
    ['x-gzip', gzipSync(plain)],
    [' GZIP ', gzipSync(plain)],
    ['deflate', deflateSync(plain)],
    ['br', brotliCompressSync(plain)],
  ])('decodes %s and drops Content-Encoding, keeping the other headers', (coding, body) => {
    expect(identityOf(of(coding, body))).toEqual({ status: 201, headers: { vary: 'accept-encoding' }, body: plain });
  });

  it('keeps a response without a coding, with one it cannot undo, or whose body does not decode, as it came', () => {
    for (const response of [of(undefined, plain), of('zstd', plain), of(['gzip'], gzipSync(plain)), of('gzip', plain)]) {
      expect(identityOf(response)).toBe(response);
    }
  });
});
