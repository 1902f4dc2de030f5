import { Logger } from '@nestjs/common';
import { STATUS_CODES } from 'node:http';
import { IdempotencyException } from './exceptions/idempotency.exception.js';
import { IdempotentReplay } from './exceptions/idempotent-replay.exception.js';
import { sendFinal } from './http/response.writer.js';
import { LOGS, PROBLEM_TITLES } from './idempotency.messages.js';
import type { ResolvedIdempotencyOptions } from './interfaces/resolved-options.interface.js';
import type { StoredResponse } from './interfaces/stored-response.interface.js';

const JSON_TYPE = { 'content-type': 'application/json; charset=utf-8' };
const PROBLEM_TYPE = { 'content-type': 'application/problem+json' };
const NONE = {};
const logger = new Logger('Idempotency');

/** How the module's errors are written: the options that decide it. */
export type ErrorOptions = Pick<ResolvedIdempotencyOptions, 'errorFormat' | 'problemTypeBaseUrl' | 'errorBody'>;
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

/** The body `errorBody` builds, as JSON text; `undefined` (logged) when it fails or has no JSON text. */
function customBody(err: IdempotencyException, build: NonNullable<ErrorOptions['errorBody']>): string | undefined {
  let text: string | undefined;
  try {
    text = JSON.stringify(build({ status: err.getStatus(), code: err.code, message: err.reason }));
    if (text === undefined) throw new TypeError('it returned a value JSON cannot write');
  } catch (failure) {
    logger.error(LOGS.errorBodyFailed(err.code, failure instanceof Error ? failure.message : String(failure)));
  }
  return text;
}

/** The default body: `{"error": "<sentence>"}`, or RFC 9457 problem details with the sentence as `detail`. */
function defaultBody(err: IdempotencyException, options: ErrorOptions): string {
  if (options.errorFormat === 'json') return JSON.stringify({ error: err.reason });
  const { code } = err;
  const status = err.getStatus();
  return JSON.stringify({
    type: code ? options.problemTypeBaseUrl + code : 'about:blank',
    title: code ? PROBLEM_TITLES[code] : STATUS_CODES[status],
    status,
    detail: err.reason,
  });
}

/**
 * The module's own error as the response it sends: a small JSON body, RFC 9457 problem details, or
 * what the application's `errorBody` makes of it; never a byte the client sent.
 */
export function errorResponse(err: IdempotencyException, options: ErrorOptions): StoredResponse {
  const body = (options.errorBody && customBody(err, options.errorBody)) ?? defaultBody(err, options);
  const type = options.errorFormat === 'json' ? JSON_TYPE : PROBLEM_TYPE;
  return { status: err.getStatus(), headers: { ...type, ...err.headers }, body: Buffer.from(body) };
}

/** Writes the module's own answer (a replay or a 4xx/5xx) before any filter can choose another. */
export function answer(response: object, err: unknown, options: AnswerOptions): void {
  if (err instanceof IdempotentReplay) {
    replay(response, err.response, options);
  } else if (err instanceof IdempotencyException) {
    sendFinal(response, errorResponse(err, options), NONE);
  }
}
