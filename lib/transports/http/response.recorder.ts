import { ServerResponse } from 'node:http';
import type { StoredResponse } from '../../shared/interfaces/stored-response.interface.js';
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
  stop(): void;
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
function sendInstead(raw: ServerResponse, end: Method, response: StoredResponse, before: HeaderSnapshot) {
  for (const name of raw.getHeaderNames()) if (!(name in before)) raw.removeHeader(name);
  raw.statusCode = response.status;
  for (const name of Object.keys(response.headers)) raw.setHeader(name, response.headers[name]);
  // Set, not left to Node: removing Express's content-length made Node fall back to chunked.
  raw.setHeader('content-length', response.body.length);
  end.call(raw, response.body);
}

type Method = (this: ServerResponse, ...args: unknown[]) => unknown;

/** One response being recorded. Kept after it stops, so that a late call still reaches the methods it stood in for. */
class Recording implements ResponseRecording {
  active = true;
  headHeaders: HeaderInput = undefined;
  heldHead: unknown[] | undefined = undefined;

  constructor(
    readonly raw: ServerResponse,
    readonly before: HeaderSnapshot,
    readonly hooks: RecorderHooks,
    readonly holdHead: boolean,
    /** The methods recording stands in for, as the response had them. */
    readonly writeHead: Method,
    readonly write: Method,
    readonly end: Method,
    /** Recording through the stand-ins of its prototype; otherwise the methods were own properties, and are put back. */
    readonly byPrototype: boolean,
  ) {}

  stop(): void {
    if (!this.active) return;
    this.active = false;
    const { raw } = this;
    if (this.byPrototype) {
      recordings.delete(raw);
      return;
    }
    raw.writeHead = this.writeHead as ServerResponse['writeHead'];
    raw.write = this.write as ServerResponse['write'];
    raw.end = this.end as ServerResponse['end'];
  }
}

/**
 * The recordings of responses recorded through their prototype's stand-ins, from start to stop: a
 * handful at a time (one per request in flight), so the garbage collector has next to nothing to
 * revisit. A `WeakMap` entry kept per response until it was collected cost a fifth of a first
 * request's CPU in garbage collection; a slot on the response, or swapping its prototype, 2-3 µs.
 */
const recordings = new WeakMap<ServerResponse, Recording>();
/** What each prototype with stand-ins had before them: where a response not being recorded goes. */
const originals = new WeakMap<object, { writeHead: Method; write: Method; end: Method }>();

function releaseHead(recording: Recording): void {
  // Another writer (a timeout's answer) may have sent a head meanwhile: a second one would throw,
  // from a promise callback, where nothing catches it.
  if (recording.heldHead && !recording.raw.headersSent) recording.writeHead.apply(recording.raw, recording.heldHead);
  recording.heldHead = undefined;
}

function recordHead(recording: Recording, raw: ServerResponse, status: number, rest: unknown[]): unknown {
  if (!recording.active) return recording.writeHead.call(raw, status, ...rest);
  // writeHead(status, headers) or writeHead(status, reason, headers)
  recording.headHeaders = (typeof rest[0] === 'string' ? rest[1] : rest[0]) as HeaderInput;
  if (!recording.holdHead) return recording.writeHead.call(raw, status, ...rest);
  recording.heldHead = [status, ...rest];
  return raw;
}

function recordWrite(recording: Recording, raw: ServerResponse, args: unknown[]): unknown {
  if (recording.active) {
    recording.stop();
    releaseHead(recording);
    recording.hooks.onStream();
  }
  return recording.write.apply(raw, args);
}

function recordEnd(recording: Recording, raw: ServerResponse, chunk: unknown, encoding: unknown, callback: unknown): unknown {
  if (!recording.active) return recording.end.call(raw, chunk, encoding, callback);
  recording.stop();
  const { before, heldHead } = recording;
  const headers: Record<string, string | string[]> = {};
  addHeaders(headers, raw.getHeaders(), before);
  addHeaders(headers, recording.headHeaders, before);
  const status = heldHead ? (heldHead[0] as number) : raw.statusCode;
  const response: StoredResponse = { status, headers, body: toBuffer(chunk, encoding) };
  const send = (): void => {
    releaseHead(recording);
    recording.end.call(raw, chunk, encoding, callback);
  };
  recording.hooks.onEnd(response).then((instead) => {
    if (instead && !raw.headersSent) sendInstead(raw, recording.end, instead, before);
    else send();
  }, send);
  return raw;
}

/**
 * Puts stand-ins for the three methods on a response prototype (Express's `app.response`, which is
 * there to be extended), once: every response of the application then passes through them, and
 * those not being recorded go straight on to the methods the prototype had.
 */
function standInsFor(base: object): { writeHead: Method; write: Method; end: Method } {
  const known = originals.get(base);
  if (known) return known;
  const proto = base as Record<'writeHead' | 'write' | 'end', Method>;
  const before = { writeHead: proto.writeHead, write: proto.write, end: proto.end };
  const method = (value: unknown) => ({ value, writable: true, configurable: true });
  Object.defineProperties(base, {
    writeHead: method(function (this: ServerResponse, ...args: unknown[]): unknown {
      const recording = recordings.get(this);
      return recording ? recordHead(recording, this, args[0] as number, args.slice(1)) : before.writeHead.apply(this, args);
    }),
    write: method(function (this: ServerResponse, ...args: unknown[]): unknown {
      const recording = recordings.get(this);
      return recording ? recordWrite(recording, this, args) : before.write.apply(this, args);
    }),
    end: method(function (this: ServerResponse, ...args: unknown[]): unknown {
      const recording = recordings.get(this);
      return recording ? recordEnd(recording, this, args[0], args[1], args[2]) : before.end.apply(this, args);
    }),
  });
  originals.set(base, before);
  return before;
}

/**
 * Records the response at the last point before it leaves: the Node `ServerResponse` Express ends.
 * (Fastify's replies are recorded by its `onSend` hook, `reply.recorder.ts`, unless the hook could
 * not be added.) What outer interceptors, serializers and filters did is already in the bytes, and
 * the real `end()` is held back until `onEnd` has stored them, so a retry sent the moment the client
 * has the first response already finds the record. Headers `before` holds with the same value are
 * not recorded: they belong to this request, not to its answer.
 *
 * `holdHead` also holds back `writeHead()` (Fastify calls it just before `end()`), so that `onEnd`
 * can still replace the whole response: a transactional route whose COMMIT failed must not send the
 * success its handler produced.
 *
 * How it stands in for the three methods was chosen by measurement (docs/performance.md). Express
 * re-points every response at its application's prototype (`app.response`); the recorder puts its
 * stand-ins there once, and a response being recorded is found in a table for as long as it is:
 * nothing is added to the response itself. Own methods on each response gave each a hidden class of
 * its own, and a slot on it or a prototype swap cost 2-3 µs per request. A response still on Node's
 * own prototype (Fastify without its hook), which the recorder must not change for every server of
 * the process, gets own methods. Methods a middleware already made own properties (compression,
 * express-session) are wrapped the same way, so the recorder still sees what those wrappers pass on.
 */
export function recordResponse(
  raw: ServerResponse,
  before: HeaderSnapshot,
  hooks: RecorderHooks,
  holdHead = false,
): ResponseRecording {
  const base = Object.getPrototypeOf(raw) as object;
  const byPrototype =
    base !== ServerResponse.prototype &&
    !recordings.has(raw) &&
    !Object.hasOwn(raw, 'writeHead') &&
    !Object.hasOwn(raw, 'write') &&
    !Object.hasOwn(raw, 'end');
  if (byPrototype) {
    const { writeHead, write, end } = standInsFor(base);
    const recording = new Recording(raw, before, hooks, holdHead, writeHead, write, end, true);
    recordings.set(raw, recording);
    return recording;
  }
  // Unbound on purpose: called with the response as `this`, or put back as they were.
  /* eslint-disable @typescript-eslint/unbound-method */
  const recording = new Recording(
    raw,
    before,
    hooks,
    holdHead,
    raw.writeHead as Method,
    raw.write as Method,
    raw.end as Method,
    false,
  );
  /* eslint-enable @typescript-eslint/unbound-method */
  // Closures, not the shared stand-ins: they chain when a response is recorded twice at once.
  raw.writeHead = function (this: ServerResponse, status: number, ...rest: unknown[]) {
    return recordHead(recording, this, status, rest);
  } as ServerResponse['writeHead'];
  raw.write = function (this: ServerResponse, ...args: unknown[]) {
    return recordWrite(recording, this, args);
  } as ServerResponse['write'];
  raw.end = function (this: ServerResponse, chunk?: unknown, encoding?: unknown, callback?: unknown) {
    return recordEnd(recording, this, chunk, encoding, callback);
  } as ServerResponse['end'];
  return recording;
}
