import { describe, expect, it } from '@jest/globals';
import { decodeEntry, decodeRecord, encodeClaim, encodeRecord, ownerPrefix } from '../../lib/stores/store-value.codec.js';
import type { IdempotencyRecord } from '../../lib/index.js';

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
