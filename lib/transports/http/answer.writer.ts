import { errorResponse, type ErrorOptions } from '../../shared/exceptions/error.response.js';
import { IdempotencyException } from '../../shared/exceptions/idempotency.exception.js';
import { IdempotentReplay } from '../../shared/exceptions/idempotent-replay.exception.js';
import type { ResolvedIdempotencyOptions } from '../../shared/interfaces/resolved-options.interface.js';
import type { StoredResponse } from '../../shared/interfaces/stored-response.interface.js';
import { sendFinal } from './response.writer.js';

const NONE = {};

/** How the module answers: its errors, and how a replay is marked. */
export type AnswerOptions = ErrorOptions & Pick<ResolvedIdempotencyOptions, 'replayFlag' | 'replayedHeader'>;

// application/json, application/problem+json, application/vnd.x+json; with or without parameters.
const JSON_MEDIA_TYPE = /^application\/(?:[^;\s]*\+)?json\s*(?:;|$)/i;

/**
 * A stored JSON object body with `"replayed": true` added; any other body as it is. Parsed and
 * written again rather than spliced, so a body that has the key already gets it set, not doubled.
 */
function flaggedBody(stored: StoredResponse): Buffer {
  const type = stored.headers['content-type'];
  if (typeof type !== 'string' || !JSON_MEDIA_TYPE.test(type)) return stored.body;
  let value: unknown;
  try {
    value = JSON.parse(stored.body.toString('utf8'));
  } catch {
    return stored.body;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return stored.body;
  return Buffer.from(JSON.stringify({ ...value, replayed: true }));
}

/** Sends a stored response again, marked as a replay the way the options say. */
function replay(response: object, stored: StoredResponse, options: AnswerOptions): void {
  const headers = options.replayedHeader === false ? NONE : { [options.replayedHeader]: 'true' };
  const body = options.replayFlag === 'header' ? stored.body : flaggedBody(stored);
  sendFinal(response, body === stored.body ? stored : { ...stored, body }, headers);
}

/** Writes the module's own answer (a replay or a 4xx/5xx) before any filter can choose another. */
export function writeAnswer(response: object, err: unknown, options: AnswerOptions): void {
  if (err instanceof IdempotentReplay) {
    replay(response, err.response, options);
  } else if (err instanceof IdempotencyException) {
    sendFinal(response, errorResponse(err, options), NONE);
  }
}
