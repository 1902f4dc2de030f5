import { IdempotencyException } from '../../shared/exceptions/idempotency.exception.js';
import { MESSAGES } from '../../shared/messages/client.messages.js';
import { LOGS } from '../../shared/messages/operator.messages.js';
import type { IdempotencyErrorCode } from '../../shared/interfaces/idempotency-error.interface.js';
import type { StoredResponse } from '../../shared/interfaces/stored-response.interface.js';

const VALUE_HEADERS = { 'content-type': 'application/json' };

/**
 * The media type of a refusal recorded in place of a value. No value record has it, so a duplicate
 * reads a refusal as the module's error, never as the first run's result.
 */
const REFUSAL_TYPE = 'application/vnd.nestjs-idempotency.refusal+json';

/** Where the status of a refusal about a value comes from: a value has no response status of its own. */
const REFUSAL_STATUS = 500;

/** Where log lines of the value's handler go. */
interface Log {
  warn(line: string): void;
  error(line: string): void;
}

function refusal(code: IdempotencyErrorCode, reason: string): StoredResponse {
  return {
    status: REFUSAL_STATUS,
    headers: { 'content-type': REFUSAL_TYPE },
    body: Buffer.from(JSON.stringify({ code, reason })),
  };
}

/** What a value is, for an operator: its class, or its type; never its content. */
function typeOf(value: unknown): string {
  if (value === null || typeof value !== 'object') return typeof value;
  const name = (Object.getPrototypeOf(value) as { constructor?: { name?: unknown } } | null)?.constructor?.name;
  return typeof name === 'string' && name !== '' ? name : 'object';
}

/**
 * What the result of inbox work, a message handler or a mutation is stored as: JSON text (`undefined`
 * as an empty body). A result JSON cannot hold (a BigInt, a cycle) or over `maxBytes` is stored as a
 * refusal (`result-unstorable`, `response-too-large`) that duplicates get as the module's error: the
 * work ran, so the key must be settled, and what it returned cannot be given again.
 */
export function storedValue(value: unknown, route: string, maxBytes: number, log: Log): StoredResponse {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    const why = (err instanceof Error ? err.message : String(err)).split('\n')[0];
    log.error(LOGS.unstorable(route, typeOf(value), why));
    return refusal('result-unstorable', MESSAGES.unstorable(typeOf(value)));
  }
  const body = Buffer.from(text ?? '');
  if (body.length <= maxBytes) return { status: 200, headers: VALUE_HEADERS, body };
  log.warn(LOGS.tooLargeToStore(route, body.length, maxBytes));
  return refusal('response-too-large', MESSAGES.tooLargeToReplay(maxBytes));
}

/** Whether `response` is a refusal stored in place of a value: small, and kept as it is whatever `maxResponseBytes` is. */
export function isRefusal(response: StoredResponse): boolean {
  return response.headers['content-type'] === REFUSAL_TYPE;
}

/** The stored value a duplicate gets; a stored refusal is thrown as the module's error. */
export function replayedValue(response: StoredResponse): unknown {
  const text = response.body.toString('utf8');
  if (isRefusal(response)) {
    const { code, reason } = JSON.parse(text) as { code: IdempotencyErrorCode; reason: string };
    throw IdempotencyException.of(code, reason, REFUSAL_STATUS);
  }
  return text.length === 0 ? undefined : JSON.parse(text);
}
