import type { ServerResponse } from 'node:http';

/** The parts of a Fastify reply the module writes to (the HTTP transport, a GraphQL replay's header); Express responses are Node's `ServerResponse`. */
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

/** Sets a header on the response under either adapter, to go out with whatever is sent. */
export function setHeader(res: object, name: string, value: string): void {
  if (isFastifyReply(res)) res.header(name, value);
  else (res as ServerResponse).setHeader(name, value);
}
