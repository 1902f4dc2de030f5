import { type ArgumentsHost, Catch, type ExceptionFilter } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { StoredResponse } from './cache/idempotency-store.interface.js';
import { REPLAYED_HEADER } from './idempotency.constants.js';
import { IdempotencyException } from './idempotency.exception.js';
import { IdempotentReplay } from './idempotent-replay.exception.js';

/** The parts of a Fastify reply the filter uses; Express responses are Node's `ServerResponse`. */
interface FastifyReplyLike {
  raw: ServerResponse;
  code(status: number): FastifyReplyLike;
  header(name: string, value: unknown): FastifyReplyLike;
  send(payload?: unknown): unknown;
}

function isFastifyReply(res: object): res is FastifyReplyLike {
  return 'raw' in res && typeof (res as FastifyReplyLike).code === 'function';
}

/** Sends `response` verbatim: no serializer, no ETag or charset rewriting by the framework. */
export function sendStored(res: object, response: StoredResponse, extraHeaders: Readonly<Record<string, string>>): void {
  if (isFastifyReply(res)) {
    res.code(response.status);
    for (const name of Object.keys(response.headers)) res.header(name, response.headers[name]);
    for (const name of Object.keys(extraHeaders)) res.header(name, extraHeaders[name]);
    res.send(response.body.length > 0 ? response.body : undefined);
    return;
  }
  const raw = res as ServerResponse;
  raw.statusCode = response.status;
  for (const name of Object.keys(response.headers)) raw.setHeader(name, response.headers[name]);
  for (const name of Object.keys(extraHeaders)) raw.setHeader(name, extraHeaders[name]);
  raw.end(response.body);
}

const REPLAYED = { [REPLAYED_HEADER]: 'true' };
const JSON_TYPE = { 'content-type': 'application/json; charset=utf-8' };

/**
 * Applied with `@Idempotent()` at method level, so it takes precedence over the application's own
 * filters (a global catch-all included) for the two things only this module throws: its 4xx/503
 * errors and replays.
 */
@Catch(IdempotencyException, IdempotentReplay)
export class IdempotencyExceptionFilter implements ExceptionFilter {
  catch(exception: IdempotencyException | IdempotentReplay, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<object>();
    if (exception instanceof IdempotentReplay) {
      sendStored(res, exception.response, REPLAYED);
      return;
    }
    const body = Buffer.from(JSON.stringify({ error: exception.reason }));
    sendStored(res, { status: exception.getStatus(), headers: JSON_TYPE, body }, exception.headers);
  }
}
