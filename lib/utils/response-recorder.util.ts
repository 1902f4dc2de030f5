import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { StoredResponse } from '../cache/idempotency-store.interface.js';

/**
 * Headers a replay must not repeat: hop-by-hop ones (RFC 9110 §7.6.1), those the server computes
 * for each response, and cookies, which belong to the first caller's session only.
 */
const UNSTORED_HEADERS = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'date',
  'set-cookie',
]);

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

type HeaderInput = OutgoingHttpHeaders | readonly (string | string[])[] | undefined;
/** Headers the response held before the handler ran (lower-case names). */
export type HeaderSnapshot = Readonly<Record<string, unknown>>;

function addHeaders(target: Record<string, string | string[]>, headers: HeaderInput, before: HeaderSnapshot): void {
  if (!headers) return;
  if (Array.isArray(headers)) {
    // writeHead(status, [name, value, name, value, ...])
    for (let i = 0; i + 1 < headers.length; i += 2) addHeader(target, String(headers[i]), headers[i + 1], before);
    return;
  }
  for (const name of Object.keys(headers)) addHeader(target, name, (headers as OutgoingHttpHeaders)[name], before);
}

function addHeader(target: Record<string, string | string[]>, name: string, value: unknown, before: HeaderSnapshot): void {
  const lower = name.toLowerCase();
  if (value === undefined || UNSTORED_HEADERS.has(lower)) return;
  // Set for this request before the handler ran (CORS, a request id): a retry gets its own.
  if (lower in before && String(before[lower]) === String(value)) return;
  target[lower] = Array.isArray(value) ? value.map(String) : String(value);
}

/** The headers of `headers` a record keeps: neither unstored ones nor those unchanged since `before`. */
export function storableHeaders(headers: Readonly<Record<string, unknown>>, before: HeaderSnapshot): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  addHeaders(out, headers as OutgoingHttpHeaders, before);
  return out;
}

function toBuffer(chunk: unknown, encoding: unknown): Buffer {
  if (chunk === undefined || chunk === null || typeof chunk === 'function') return EMPTY;
  if (Buffer.isBuffer(chunk)) return chunk;
  if (typeof chunk === 'string') return Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
  if (chunk instanceof Uint8Array) return Buffer.from(chunk);
  return Buffer.from(String(chunk));
}

/**
 * Records the response at the last point before it leaves: the Node `ServerResponse` both Express
 * and Fastify end. What outer interceptors, serializers and filters did is already in the bytes, and
 * the real `end()` is held back until `onEnd` has stored them, so a retry sent the moment the client
 * has the first response already finds the record. Headers `before` holds with the same value are
 * not recorded: they belong to this request, not to its answer.
 */
export function recordResponse(raw: ServerResponse, before: HeaderSnapshot, hooks: RecorderHooks): ResponseRecording {
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
  } as ServerResponse['writeHead'];

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
