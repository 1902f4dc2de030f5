import type { ServerResponse } from 'node:http';

/** The parts of a Fastify reply used here; Express responses are Node's `ServerResponse`. */
export interface FastifyReplyLike {
  raw: ServerResponse;
  code(status: number): FastifyReplyLike;
  header(name: string, value: unknown): FastifyReplyLike;
  getHeaders(): Record<string, unknown>;
  send(payload?: unknown): unknown;
}

export function isFastifyReply(res: object): res is FastifyReplyLike {
  return 'raw' in res && typeof (res as FastifyReplyLike).code === 'function';
}

/** Node's response under either adapter's. */
export function rawResponse(res: object): ServerResponse {
  return isFastifyReply(res) ? res.raw : (res as ServerResponse);
}

/**
 * The headers the response holds so far, names lower case: for Fastify those of the reply too,
 * which reach Node's response only when it is sent.
 */
export function currentHeaders(res: object): Record<string, unknown> {
  return isFastifyReply(res) ? res.getHeaders() : (res as ServerResponse).getHeaders();
}

/** Sets a header on the response under either adapter, to go out with whatever is sent. */
export function setHeader(res: object, name: string, value: string): void {
  if (isFastifyReply(res)) res.header(name, value);
  else (res as ServerResponse).setHeader(name, value);
}
