import { StreamableFile } from '@nestjs/common';
import { IdempotencyException } from './exceptions/idempotency.exception.js';
import { IdempotentReplay } from './exceptions/idempotent-replay.exception.js';
import { sendFinal } from './http/response.writer.js';
import { REPLAYED_HEADER } from './idempotency.constants.js';
import type { StoredResponse } from './interfaces/stored-response.interface.js';

const REPLAYED = { [REPLAYED_HEADER]: 'true' };
const JSON_TYPE = { 'content-type': 'application/json; charset=utf-8' };
const NONE = {};

/** Whether a handler's value is a stream, which cannot be recorded. */
export function isStream(value: unknown): boolean {
  return (
    value instanceof StreamableFile ||
    (typeof value === 'object' && value !== null && typeof (value as { pipe?: unknown }).pipe === 'function')
  );
}

/** The module's own error as the response it sends: a small JSON body, never a byte the client sent. */
export function errorResponse(err: IdempotencyException): StoredResponse {
  return {
    status: err.getStatus(),
    headers: { ...JSON_TYPE, ...err.headers },
    body: Buffer.from(JSON.stringify({ error: err.reason })),
  };
}

/** Writes the module's own answer (a replay or a 4xx/5xx) before any filter can choose another. */
export function answer(response: object, err: unknown): void {
  if (err instanceof IdempotentReplay) {
    sendFinal(response, err.response, REPLAYED);
  } else if (err instanceof IdempotencyException) {
    sendFinal(response, errorResponse(err), NONE);
  }
}
