import type { ClaimOutcome, HeldEntry, IdempotencyRecord } from '../contract/idempotency-store.interface.js';
import type { StoredResponse } from '../../shared/interfaces/stored-response.interface.js';
import { FAILURES } from '../../shared/messages/operator.messages.js';

const CLAIM_TAG = 0x43; // 'C'
const RECORD_TAG = 0x52; // 'R'
const VERSIONED_TAG = 0x56; // 'V'
const NL = 0x0a;
/**
 * The newest record format this release reads. Format 1 is tagged 'R' (a readable response); later
 * ones are written as "V<n>\n…": 2 is a sealed one (`encryption`), "V2\n<fingerprint>\n<sealed>". A
 * pod that does not know a format refuses the key (503) instead of taking a value it cannot read for
 * a foreign one and running the handler again.
 */
export const RECORD_FORMAT = 2;
const SEALED_FORMAT = 2;
/** What a sealed record has for a response: the real one is in `sealed`. */
export const SEALED_PLACEHOLDER: StoredResponse = Object.freeze({ status: 0, headers: Object.freeze({}), body: Buffer.alloc(0) });
/** The most digits a format number is read with. */
const MAX_FORMAT_DIGITS = 9;

// One flat value per key, for Redis and for InMemoryStore alike (one Buffer costs far less memory
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
  const { fingerprint, response, sealed } = record;
  if (sealed) return Buffer.concat([Buffer.from(`V${SEALED_FORMAT}\n${fingerprint}\n`, 'latin1'), sealed]);
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

/**
 * A "V<n>" value as what it means to a claimant: a sealed record, or unreadable (a newer format, or a
 * sealed one that lost its fingerprint line); `undefined` for any other value.
 */
function versioned(value: Buffer): HeldEntry | undefined {
  const format = formatOf(value);
  if (format === undefined || format < SEALED_FORMAT) return undefined;
  if (format > RECORD_FORMAT) return { state: 'unreadable', reason: FAILURES.newerFormat(format, RECORD_FORMAT) };
  const start = value.indexOf(NL) + 1;
  const end = value.indexOf(NL, start);
  if (end < 0) return { state: 'unreadable', reason: FAILURES.damagedSealed };
  const record = {
    fingerprint: value.toString('latin1', start, end),
    response: SEALED_PLACEHOLDER,
    sealed: value.subarray(end + 1),
  };
  return { state: 'completed', record };
}

/**
 * A record value as the SQL stores and InMemoryStore keep it (they know it is a record): completed
 * (readable or sealed), or unreadable when a newer release wrote it.
 */
export function readRecord(value: Buffer): HeldEntry {
  const entry = versioned(value);
  if (entry) return entry;
  // A damaged tag or head may stand for a charge all the same: unreadable, never a store failure.
  const record = value[0] === RECORD_TAG ? checkedRecord(value) : undefined;
  return record ? { state: 'completed', record } : { state: 'unreadable', reason: FAILURES.damagedRecord };
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
  if (value[0] !== RECORD_TAG) return versioned(value);
  const record = checkedRecord(value);
  return record && { state: 'completed', record };
}
