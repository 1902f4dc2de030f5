import { ServerResponse } from 'node:http';
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
interface Recording {
  active: boolean;
  readonly raw: ServerResponse;
  readonly before: HeaderSnapshot;
  readonly hooks: RecorderHooks;
  readonly holdHead: boolean;
  /** The methods recording stands in for, as the response had them. */
  readonly writeHead: Method;
  readonly write: Method;
  readonly end: Method;
  /** Recording by prototype; otherwise the methods were own properties, and are put back. */
  readonly byPrototype: boolean;
  headHeaders: HeaderInput;
  heldHead: unknown[] | undefined;
}

/**
 * Where a response recorded by prototype keeps its recording: an own property with the same value
 * type on every response, so all share one hidden class. A WeakMap entry per response cost a fifth
 * of a first request's CPU in garbage collection (ephemerons); this costs nothing measurable.
 */
const RECORDING = Symbol('idempotency recording');
type Recorded = ServerResponse & { [RECORDING]: Recording };
/** A recording prototype per base prototype (Express's `app.response`, Node's `ServerResponse`). */
const prototypes = new WeakMap<object, object>();
const ours = new WeakSet<object>();

function stop(recording: Recording): void {
  if (!recording.active) return;
  recording.active = false;
  // A recording prototype stays: its methods pass through from now on, and swapping back would cost
  // as much again as swapping in.
  if (recording.byPrototype) return;
  const { raw } = recording;
  raw.writeHead = recording.writeHead as ServerResponse['writeHead'];
  raw.write = recording.write as ServerResponse['write'];
  raw.end = recording.end as ServerResponse['end'];
}

function releaseHead(recording: Recording): void {
  if (recording.heldHead) recording.writeHead.apply(recording.raw, recording.heldHead);
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
    stop(recording);
    releaseHead(recording);
    recording.hooks.onStream();
  }
  return recording.write.apply(raw, args);
}

function recordEnd(recording: Recording, raw: ServerResponse, chunk: unknown, encoding: unknown, callback: unknown): unknown {
  if (!recording.active) return recording.end.call(raw, chunk, encoding, callback);
  stop(recording);
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

// The prototype's stand-ins are shared by every response; each finds its recording by `this`.
function sharedWriteHead(this: Recorded, status: number, ...rest: unknown[]): unknown {
  return recordHead(this[RECORDING], this, status, rest);
}
function sharedWrite(this: Recorded, ...args: unknown[]): unknown {
  return recordWrite(this[RECORDING], this, args);
}
function sharedEnd(this: Recorded, chunk?: unknown, encoding?: unknown, callback?: unknown): unknown {
  return recordEnd(this[RECORDING], this, chunk, encoding, callback);
}

function prototypeFor(base: object): object {
  let proto = prototypes.get(base);
  if (!proto) {
    const method = (value: unknown) => ({ value, writable: true, configurable: true });
    proto = Object.create(base, {
      writeHead: method(sharedWriteHead),
      write: method(sharedWrite),
      end: method(sharedEnd),
    }) as object;
    prototypes.set(base, proto);
    ours.add(proto);
  }
  return proto;
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
 * re-points every response at its application's prototype; there the recorder swaps in a cached
 * prototype of its own, because assigning the methods gave each response a hidden class of its own,
 * which cost more CPU and garbage than the rest of the recording. A response still on Node's own
 * prototype (Fastify without the hook) gets them as own properties: swapping its prototype cost about
 * 70 µs more per request, in Node's http internals that had seen one shape of response until then. Methods a
 * middleware already made own properties (compression, express-session) are wrapped the same way,
 * so the recorder still sees what those wrappers pass on.
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
    !ours.has(base) &&
    !Object.hasOwn(raw, 'writeHead') &&
    !Object.hasOwn(raw, 'write') &&
    !Object.hasOwn(raw, 'end');
  const recording: Recording = {
    active: true,
    raw,
    before,
    hooks,
    holdHead,
    // Unbound on purpose: called with the response as `this`, or put back as they were.
    /* eslint-disable @typescript-eslint/unbound-method */
    writeHead: raw.writeHead as Method,
    write: raw.write as Method,
    end: raw.end as Method,
    /* eslint-enable @typescript-eslint/unbound-method */
    byPrototype,
    headHeaders: undefined,
    heldHead: undefined,
  };
  if (byPrototype) {
    (raw as Recorded)[RECORDING] = recording;
    Object.setPrototypeOf(raw, prototypeFor(base));
  } else {
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
  }
  return { stop: () => stop(recording) };
}
