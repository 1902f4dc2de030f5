import type { ServerResponse } from 'node:http';
import type { StoredResponse } from '../interfaces/stored-response.interface.js';
import { addHeaders, type HeaderInput, type HeaderSnapshot } from './stored-headers.js';

const EMPTY = Buffer.alloc(0);

/** What the recorder reports. */
export interface RecorderHooks {
  /**
   * The response is complete; the real `end()` runs once the returned promise settles. A response the
   * promise resolves to goes out instead, when nothing has been sent yet (see `holdHead`).
   */
  onEnd(response: StoredResponse): Promise<StoredResponse | void>;
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

/** Sends `response` in place of what `end()` was given: headers set since `before` go, its own come. */
function sendInstead(
  raw: ServerResponse,
  end: (...a: unknown[]) => ServerResponse,
  response: StoredResponse,
  before: HeaderSnapshot,
) {
  for (const name of raw.getHeaderNames()) if (!(name in before)) raw.removeHeader(name);
  raw.statusCode = response.status;
  for (const name of Object.keys(response.headers)) raw.setHeader(name, response.headers[name]);
  // Set, not left to Node: removing Express's content-length made Node fall back to chunked.
  raw.setHeader('content-length', response.body.length);
  end.call(raw, response.body);
}

/**
 * Records the response at the last point before it leaves: the Node `ServerResponse` both Express
 * and Fastify end. What outer interceptors, serializers and filters did is already in the bytes, and
 * the real `end()` is held back until `onEnd` has stored them, so a retry sent the moment the client
 * has the first response already finds the record. Headers `before` holds with the same value are
 * not recorded: they belong to this request, not to its answer.
 *
 * `holdHead` also holds back `writeHead()` (Fastify calls it just before `end()`), so that `onEnd`
 * can still replace the whole response: a transactional route whose COMMIT failed must not send the
 * success its handler produced.
 */
export function recordResponse(
  raw: ServerResponse,
  before: HeaderSnapshot,
  hooks: RecorderHooks,
  holdHead = false,
): ResponseRecording {
  // Unbound on purpose: put back as they were, or called with the response as `this`.
  // eslint-disable-next-line @typescript-eslint/unbound-method
  const original = { writeHead: raw.writeHead, write: raw.write, end: raw.end };
  const writeHead = original.writeHead as (...args: unknown[]) => ServerResponse;
  let headHeaders: HeaderInput;
  let heldHead: unknown[] | undefined;
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
    if (!holdHead) return writeHead.call(this, status, ...rest);
    heldHead = [status, ...rest];
    return this;
  };
  const releaseHead = (self: ServerResponse): void => {
    if (heldHead) writeHead.apply(self, heldHead);
    heldHead = undefined;
  };

  raw.write = function (this: ServerResponse, ...args: unknown[]) {
    restore();
    releaseHead(this);
    hooks.onStream();
    return (original.write as (...a: unknown[]) => boolean).apply(this, args);
  } as ServerResponse['write'];

  raw.end = function (this: ServerResponse, chunk?: unknown, encoding?: unknown, callback?: unknown) {
    restore();
    const headers: Record<string, string | string[]> = {};
    addHeaders(headers, this.getHeaders(), before);
    addHeaders(headers, headHeaders, before);
    const status = heldHead ? (heldHead[0] as number) : this.statusCode;
    const response: StoredResponse = { status, headers, body: toBuffer(chunk, encoding) };
    const end = original.end as (...a: unknown[]) => ServerResponse;
    const send = (): void => {
      releaseHead(this);
      end.call(this, chunk, encoding, callback);
    };
    hooks.onEnd(response).then((instead) => {
      if (instead && !this.headersSent) sendInstead(this, end, instead, before);
      else send();
    }, send);
    return this;
  } as ServerResponse['end'];

  return { abandon: restore };
}
