import { describe, expect, it } from '@jest/globals';
import {
  decodeEntry,
  decodeRecord,
  encodeClaim,
  encodeRecord,
  ownerPrefix,
  readRecord,
  RECORD_FORMAT,
  SEALED_PLACEHOLDER,
} from '../../lib/stores/shared/store-value.codec.js';
import type { IdempotencyRecord } from '../../lib/stores/index.js';

const record: IdempotencyRecord = {
  fingerprint: 'f'.repeat(64),
  response: {
    status: 201,
    headers: { 'content-type': 'application/json', 'x-tags': ['a', 'b'], 'x-name': 'Zoë ✓' },
    body: Buffer.from('{"id":"tx-1",\n"note":"two\nlines ✓"}\n'),
  },
};

describe('record codec (the one value per key of both stores)', () => {
  it('encodes a claim as C<owner>\\n<fingerprint>, whose start is the fencing prefix', () => {
    expect(ownerPrefix('owner-1')).toBe('Cowner-1\n');
    expect(encodeClaim('owner-1', 'fp')).toBe('Cowner-1\nfp');
  });

  it('encodes a record as R<fingerprint>\\n<status>\\n<headers JSON>\\n<body bytes>', () => {
    const encoded = encodeRecord(record);
    const head = `R${record.fingerprint}\n201\n${JSON.stringify(record.response.headers)}\n`;
    expect(encoded.equals(Buffer.concat([Buffer.from(head), record.response.body]))).toBe(true);
  });

  it('decodes a record back exactly, bodies with newlines and binary bytes included', () => {
    expect(decodeRecord(encodeRecord(record))).toEqual(record);
    const binary: IdempotencyRecord = {
      fingerprint: 'x',
      response: { status: 204, headers: {}, body: Buffer.from([0, 10, 255, 10, 13]) },
    };
    const back = decodeRecord(encodeRecord(binary));
    expect(back.response.body.equals(binary.response.body)).toBe(true);
    expect(back).toEqual(binary);
    const empty: IdempotencyRecord = { fingerprint: 'y', response: { status: 200, headers: {}, body: Buffer.alloc(0) } };
    expect(decodeRecord(encodeRecord(empty))).toEqual(empty);
  });

  it('reads a value of a newer format ("V<n>\\n", n > 2) as unreadable, naming it; any other V value is foreign', () => {
    expect(RECORD_FORMAT).toBe(2);
    const unreadable = (n: string) => ({
      state: 'unreadable',
      reason: `the key's record is in format ${n}, written by a newer release (this one reads up to 2); it is neither replayed nor run again until the deploy is complete`,
    });
    expect(decodeEntry(Buffer.from('V3\nanything'))).toEqual(unreadable('3'));
    expect(decodeEntry(Buffer.from('V123456789\n'))).toEqual(unreadable('123456789'));
    expect(readRecord(Buffer.from('V10\nx'))).toEqual(unreadable('10'));
    // Not a newer format: this one's own number, a zero, a sign, too many digits, no newline, nothing.
    for (const value of ['V1\nx', 'V0\nx', 'V01\nx', 'V-3\nx', 'V3x\n', 'V1234567890\nx', 'V3', 'V\nx']) {
      expect(decodeEntry(Buffer.from(value))).toBeUndefined();
    }
    expect(readRecord(encodeRecord(record))).toEqual({ state: 'completed', record: decodeRecord(encodeRecord(record)) });
  });

  it('encodes a sealed record as V2\\n<fingerprint>\\n<sealed bytes> and reads it back; a damaged one is unreadable', () => {
    const sealed = Buffer.from([0, 10, 0xff, 10, 0x52]);
    const value = encodeRecord({ fingerprint: 'fp-s', response: SEALED_PLACEHOLDER, sealed });
    expect(value).toEqual(Buffer.concat([Buffer.from('V2\nfp-s\n'), sealed]));
    for (const read of [decodeEntry(value), readRecord(value)]) {
      expect(read).toEqual({ state: 'completed', record: { fingerprint: 'fp-s', response: SEALED_PLACEHOLDER, sealed } });
    }
    expect(decodeEntry(Buffer.from('V2\nno-fingerprint-line'))).toEqual({
      state: 'unreadable',
      reason: 'the key holds a sealed record without its fingerprint line (damaged); it is neither replayed nor run again',
    });
  });

  it('tells a claim, a record and a foreign value apart', () => {
    expect(decodeEntry(Buffer.from(encodeClaim('o', 'fp-1')))).toEqual({ state: 'in-flight', fingerprint: 'fp-1' });
    expect(decodeEntry(encodeRecord(record))).toEqual({ state: 'completed', record });
    // Values this codec did not write, or damaged ones, are nothing of ours: undefined.
    for (const foreign of [
      'something else\nfp',
      'Xfp\n200\n{}\n',
      'C',
      'Cowner-without-newline',
      'C\nfp',
      'R',
      'Rfp',
      'Rfp\n200',
      'Rfp\n200\n{}',
      'Rfp\nabc\n{}\nbody',
      'Rfp\n99\n{}\nbody',
      'Rfp\n600\n{}\nbody',
      'Rfp\n200.5\n{}\nbody',
      'Rfp\n200\n{not json\nbody',
      'Rfp\n200\nnull\nbody',
      'Rfp\n200\n[]\nbody',
      'Rfp\n200\n"s"\nbody',
      '',
    ]) {
      expect(decodeEntry(Buffer.from(foreign))).toBeUndefined();
    }
    expect(decodeEntry(Buffer.from('Co\n'))).toEqual({ state: 'in-flight', fingerprint: '' });
    for (const status of [100, 599]) {
      expect(decodeEntry(Buffer.from(`Rfp\n${status}\n{}\n`))).toEqual({
        state: 'completed',
        record: { fingerprint: 'fp', response: { status, headers: {}, body: Buffer.alloc(0) } },
      });
    }
  });
});
