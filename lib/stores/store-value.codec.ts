import type { ClaimOutcome, HeldEntry, IdempotencyRecord } from '../interfaces/idempotency-store.interface.js';
import type { StoredResponse } from '../interfaces/stored-response.interface.js';
import { STORE_ERRORS } from '../idempotency.messages.js';

const CLAIM_TAG = 0x43; // 'C'
const RECORD_TAG = 0x52; // 'R'
const VERSIONED_TAG = 0x56; // 'V'
const NL = 0x0a;
/**
 * The record format this release writes, tagged 'R'. A later format is written as "V<n>\n…": a pod
 * that does not know it refuses the key (503) instead of taking a value it cannot read for a foreign
 * one and running the handler again.
 */
export const RECORD_FORMAT = 1;
/** The most digits a format number is read with. */
const MAX_FORMAT_DIGITS = 9;

// One flat value per key, for Redis and for InMemoryCache alike (one Buffer costs far less memory
// than the objects of a record): "C<owner>\n<fingerprint>" for a claim and
// "R<fingerprint>\n<status>\n<headers JSON>\n<body>" for a record. Owner, fingerprint, status and
// the JSON never hold a raw newline; the body is raw bytes.

/** The start of a claim value: what fenced operations compare. */
export function ownerPrefix(owner: string): string {
  return `C${owner}\n`;
}

export function encodeClaim(owner: string, fingerprint: string): string {
  return `${ownerPrefix(owner)}${fingerprint}`;
}

export function encodeRecord(record: IdempotencyRecord): Buffer {
  const { fingerprint, response } = record;
  const head = `R${fingerprint}\n${response.status}\n${JSON.stringify(response.headers)}\n`;
  const out = Buffer.allocUnsafe(Buffer.byteLength(head) + response.body.length);
  const n = out.write(head);
  response.body.copy(out, n);
  return out;
}

/** Reads a record value back. */
export function decodeRecord(value: Buffer): IdempotencyRecord {
  const a = value.indexOf(NL);
  const b = value.indexOf(NL, a + 1);
  const c = value.indexOf(NL, b + 1);
  const response: StoredResponse = {
    status: Number(value.toString('latin1', a + 1, b)),
    headers: JSON.parse(value.toString('utf8', b + 1, c)) as StoredResponse['headers'],
    body: value.subarray(c + 1),
  };
  return { fingerprint: value.toString('latin1', 1, a), response };
}

/**
 * A record value read back, or `undefined` when it is not one {@link encodeRecord} writes. A missing
 * newline needs no check of its own: it leaves an empty status or header field, which fails below.
 */
function checkedRecord(value: Buffer): IdempotencyRecord | undefined {
  let record: IdempotencyRecord;
  try {
    record = decodeRecord(value);
  } catch {
    return undefined;
  }
  const { status, headers } = record.response;
  const headersOk = typeof headers === 'object' && headers !== null && !Array.isArray(headers);
  return Number.isInteger(status) && status >= 100 && status <= 599 && headersOk ? record : undefined;
}

/** The format number of a "V<n>\n…" value, or `undefined` when the value is not one. */
function formatOf(value: Buffer): number | undefined {
  if (value[0] !== VERSIONED_TAG) return undefined;
  const nl = value.indexOf(NL);
  if (nl < 2 || nl > MAX_FORMAT_DIGITS + 1) return undefined;
  const digits = value.toString('latin1', 1, nl);
  return /^[1-9][0-9]*$/.test(digits) ? Number(digits) : undefined;
}

/** A value of a newer record format than this release writes, as what it means to a claimant; else `undefined`. */
function newerFormat(value: Buffer): HeldEntry | undefined {
  const format = formatOf(value);
  return format !== undefined && format > RECORD_FORMAT
    ? { state: 'unreadable', reason: STORE_ERRORS.newerFormat(format, RECORD_FORMAT) }
    : undefined;
}

/**
 * A record value as the SQL stores and InMemoryCache keep it (they know it is a record): completed,
 * or unreadable when a newer release wrote it.
 */
export function readRecord(value: Buffer): HeldEntry {
  return newerFormat(value) ?? { state: 'completed', record: decodeRecord(value) };
}

/**
 * What a stored value means to a claimant, or `undefined` for a value this codec did not write
 * (another application's, or a damaged one): the key then holds nothing of ours.
 */
export function decodeEntry(value: Buffer): ClaimOutcome | undefined {
  if (value[0] === CLAIM_TAG) {
    const nl = value.indexOf(NL);
    return nl > 1 ? { state: 'in-flight', fingerprint: value.toString('latin1', nl + 1) } : undefined;
  }
  if (value[0] !== RECORD_TAG) return newerFormat(value);
  const record = checkedRecord(value);
  return record && { state: 'completed', record };
}
