import { Logger } from '@nestjs/common';
import { STATUS_CODES } from 'node:http';
import { PROBLEM_TITLES } from '../messages/client.messages.js';
import { LOGS } from '../messages/operator.messages.js';
import type { ResolvedIdempotencyOptions } from '../interfaces/resolved-options.interface.js';
import type { StoredResponse } from '../interfaces/stored-response.interface.js';
import type { IdempotencyException } from './idempotency.exception.js';

const JSON_TYPE = { 'content-type': 'application/json; charset=utf-8' };
const PROBLEM_TYPE = { 'content-type': 'application/problem+json' };
const logger = new Logger('Idempotency');

/** How the module's errors are written: the options that decide it. */
export type ErrorOptions = Pick<ResolvedIdempotencyOptions, 'errorFormat' | 'problemTypeBaseUrl' | 'errorBody'>;

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
