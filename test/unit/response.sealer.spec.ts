import { describe, expect, it } from '@jest/globals';
import { ResponseSealer } from '../../lib/ops/encryption/response.sealer.js';
import { UnsealableRecord } from '../../lib/shared/exceptions/unsealable-record.exception.js';
import { type IdempotencyEncryption, InMemoryStore } from '../../lib/index.js';
import type { IdempotencyRecord } from '../../lib/stores/index.js';
import { resolveModuleOptions } from '../../lib/shared/options/module-options.resolver.js';
import { SEALED_PLACEHOLDER } from '../../lib/stores/shared/store-value.codec.js';

const K1 = Buffer.alloc(32, 1);
const K2 = Buffer.alloc(32, 2);
const sealer = (encryption?: IdempotencyEncryption) =>
  new ResponseSealer(resolveModuleOptions({ encryption }, () => new InMemoryStore()));
const response = {
  status: 201,
  headers: { 'content-type': 'application/json', 'x-multi': ['a', 'b'] },
  body: Buffer.from('{"card":"4242424242424242","binary":"\n\u0000"}'),
};
const KEY = 'idem:%:pay-1';

/** The record with one byte of its sealed part changed, `at` bytes from its start. */
function altered(record: IdempotencyRecord, at: number): IdempotencyRecord {
  const sealed = Buffer.from(record.sealed!);
  sealed[at] ^= 1;
  return { ...record, sealed };
}
const openError = (run: () => unknown): string => {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(UnsealableRecord);
    return (err as Error).message;
  }
  throw new Error('it opened');
};

describe('ResponseSealer', () => {
  it('without encryption, stores and replays the response as it is', () => {
    const plain = sealer();
    const record = plain.record(KEY, 'fp', response);
    expect(record).toEqual({ fingerprint: 'fp', response });
    expect(plain.response(KEY, record)).toBe(response);
  });

  it('seals with the current key: "<id>\\n" then IV, tag and ciphertext, a fresh IV each time; opens it back', () => {
    const s = sealer({ keys: { k1: K1 }, current: 'k1' });
    const record = s.record(KEY, 'fp', response);
    expect(record.fingerprint).toBe('fp');
    expect(record.response).toBe(SEALED_PLACEHOLDER);
    expect(record.sealed!.subarray(0, 3).toString()).toBe('k1\n');
    expect(record.sealed!.length).toBeGreaterThan(3 + 12 + 16);
    expect(record.sealed!.includes('4242')).toBe(false);
    expect(record.sealed!.includes('content-type')).toBe(false);
    const again = s.record(KEY, 'fp', response);
    expect(again.sealed!.subarray(3, 15)).not.toEqual(record.sealed!.subarray(3, 15));
    expect(s.response(KEY, record)).toEqual(response);
  });

  it('rotation: a record sealed with an older key opens while that key is listed; new ones use the current key', () => {
    const old = sealer({ keys: { k1: K1 }, current: 'k1' }).record(KEY, 'fp', response);
    const rotated = sealer({ keys: { k1: K1, k2: K2 }, current: 'k2' });
    expect(rotated.response(KEY, old)).toEqual(response);
    expect(rotated.record(KEY, 'fp', response).sealed!.subarray(0, 3).toString()).toBe('k2\n');
    expect(openError(() => sealer({ keys: { k2: K2 }, current: 'k2' }).response(KEY, old))).toBe(
      'the key\'s record is sealed with encryption key "k1", which is not among encryption.keys: restore that key, or forget the record',
    );
  });

  it('refuses a record altered anywhere, cut short, moved to another key or fingerprint, naming the key id', () => {
    const s = sealer({ keys: { k1: K1 }, current: 'k1' });
    const record = s.record(KEY, 'fp', response);
    const failed =
      'the key\'s record, sealed with encryption key "k1", failed authentication (altered, or moved from another key): forget the record';
    for (const at of [3, 3 + 12, 3 + 12 + 16, record.sealed!.length - 1])
      expect(openError(() => s.response(KEY, altered(record, at)))).toBe(failed);
    expect(openError(() => s.response(KEY, { ...record, sealed: record.sealed!.subarray(0, 3 + 12 + 10) }))).toBe(failed);
    expect(openError(() => s.response('idem:%:pay-2', record))).toBe(failed);
    expect(openError(() => s.response(KEY, { ...record, fingerprint: 'other' }))).toBe(failed);
    // A key made of another key's bytes is another key.
    expect(openError(() => sealer({ keys: { k1: K2 }, current: 'k1' }).response(KEY, record))).toBe(failed);
  });

  it('refuses a sealed record when the application has no encryption, and one without a key id', () => {
    const record = sealer({ keys: { k1: K1 }, current: 'k1' }).record(KEY, 'fp', response);
    expect(openError(() => sealer().response(KEY, record))).toBe(
      "the key's record is sealed, but this application has no encryption option: configure its keys, or forget it",
    );
    const s = sealer({ keys: { k1: K1 }, current: 'k1' });
    expect(openError(() => s.response(KEY, { ...record, sealed: Buffer.from('no newline at all') }))).toContain(
      'is not among encryption.keys',
    );
  });
});
