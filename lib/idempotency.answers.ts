import { StreamableFile } from '@nestjs/common';
import { STATUS_CODES } from 'node:http';
import { IdempotencyException } from './exceptions/idempotency.exception.js';
import { IdempotentReplay } from './exceptions/idempotent-replay.exception.js';
import { sendFinal } from './http/response.writer.js';
import { REPLAYED_HEADER } from './idempotency.constants.js';
import { PROBLEM_TITLES } from './idempotency.messages.js';
import type { ResolvedIdempotencyOptions } from './interfaces/resolved-options.interface.js';
import type { StoredResponse } from './interfaces/stored-response.interface.js';

const REPLAYED = { [REPLAYED_HEADER]: 'true' };
const JSON_TYPE = { 'content-type': 'application/json; charset=utf-8' };
const PROBLEM_TYPE = { 'content-type': 'application/problem+json' };
const NONE = {};

/** Whether a handler's value is a stream, which cannot be recorded. */
export function isStream(value: unknown): boolean {
  return (
    value instanceof StreamableFile ||
    (typeof value === 'object' && value !== null && typeof (value as { pipe?: unknown }).pipe === 'function')
  );
}

/** How the module's errors are written: the two options that decide it. */
export type ErrorOptions = Pick<ResolvedIdempotencyOptions, 'errorFormat' | 'problemTypeBaseUrl'>;

/**
 * The module's own error as the response it sends: a small JSON body, or RFC 9457 problem details
 * whose `detail` is the same sentence; never a byte the client sent.
 */
export function errorResponse(err: IdempotencyException, options: ErrorOptions): StoredResponse {
  const status = err.getStatus();
  if (options.errorFormat === 'json') {
    return { status, headers: { ...JSON_TYPE, ...err.headers }, body: Buffer.from(JSON.stringify({ error: err.reason })) };
  }
  const { code } = err;
  const problem = {
    type: code ? options.problemTypeBaseUrl + code : 'about:blank',
    title: code ? PROBLEM_TITLES[code] : STATUS_CODES[status],
    status,
    detail: err.reason,
  };
  return { status, headers: { ...PROBLEM_TYPE, ...err.headers }, body: Buffer.from(JSON.stringify(problem)) };
}

/** Writes the module's own answer (a replay or a 4xx/5xx) before any filter can choose another. */
export function answer(response: object, err: unknown, options: ErrorOptions): void {
  if (err instanceof IdempotentReplay) {
    sendFinal(response, err.response, REPLAYED);
  } else if (err instanceof IdempotencyException) {
    sendFinal(response, errorResponse(err, options), NONE);
  }
}
