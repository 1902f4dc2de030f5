import type { ServerResponse } from 'node:http';
import type { StoredResponse } from '../interfaces/stored-response.interface.js';
import { addHeaders, type HeaderInput, type HeaderSnapshot } from './stored-headers.js';

const EMPTY = Buffer.alloc(0);

/** What the recorder reports. */
export interface RecorderHooks {
  /** The response is complete; the real `end()` runs once the returned promise settles. */
  onEnd(response: StoredResponse): Promise<void>;
  /** The response is streamed (written in parts) and will not be recorded. */
  onStream(): void;
}

/** Handle on one recording. */
export interface ResponseRecording {
  /** Stops recording; the response goes out untouched. */
  abandon(): void;
}

function toBuffer(chunk: unknown, encoding: unknown): Buffer {
  if (chunk === undefined || chunk === null || typeof chunk === 'function') return EMPTY;
  if (Buffer.isBuffer(chunk)) return chunk;
  if (typeof chunk === 'string') return Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
  if (chunk instanceof Uint8Array) return Buffer.from(chunk);
  // Node itself refuses any other chunk type; recording its text is the least surprising guess.
  return Buffer.from(String(chunk as number));
}

/**
 * Records the response at the last point before it leaves: the Node `ServerResponse` both Express
 * and Fastify end. What outer interceptors, serializers and filters did is already in the bytes, and
 * the real `end()` is held back until `onEnd` has stored them, so a retry sent the moment the client
 * has the first response already finds the record. Headers `before` holds with the same value are
 * not recorded: they belong to this request, not to its answer.
 */
export function recordResponse(raw: ServerResponse, before: HeaderSnapshot, hooks: RecorderHooks): ResponseRecording {
  // Unbound on purpose: put back as they were, or called with the response as `this`.
  // eslint-disable-next-line @typescript-eslint/unbound-method
  const original = { writeHead: raw.writeHead, write: raw.write, end: raw.end };
  let headHeaders: HeaderInput;
  let active = true;

  const restore = (): void => {
    if (!active) return;
    active = false;
    raw.writeHead = original.writeHead;
    raw.write = original.write;
    raw.end = original.end;
  };

  raw.writeHead = function (this: ServerResponse, status: number, ...rest: unknown[]) {
    // writeHead(status, headers) or writeHead(status, reason, headers)
    headHeaders = (typeof rest[0] === 'string' ? rest[1] : rest[0]) as HeaderInput;
    return (original.writeHead as (...args: unknown[]) => ServerResponse).call(this, status, ...rest);
  };

  raw.write = function (this: ServerResponse, ...args: unknown[]) {
    restore();
    hooks.onStream();
    return (original.write as (...a: unknown[]) => boolean).apply(this, args);
  } as ServerResponse['write'];

  raw.end = function (this: ServerResponse, chunk?: unknown, encoding?: unknown, callback?: unknown) {
    restore();
    const headers: Record<string, string | string[]> = {};
    addHeaders(headers, this.getHeaders(), before);
    addHeaders(headers, headHeaders, before);
    const response: StoredResponse = { status: this.statusCode, headers, body: toBuffer(chunk, encoding) };
    const end = original.end as (...a: unknown[]) => ServerResponse;
    const args = [chunk, encoding, callback];
    hooks.onEnd(response).then(
      () => end.apply(this, args),
      () => end.apply(this, args),
    );
    return this;
  } as ServerResponse['end'];

  return { abandon: restore };
}
