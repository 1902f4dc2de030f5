import type { ServerResponse } from 'node:http';
import type { StoredResponse } from '../../shared/interfaces/stored-response.interface.js';
import type { RecorderHooks, ResponseRecording } from './response.recorder.js';
import { addHeaders, type HeaderSnapshot } from './stored-headers.js';

/** One reply being recorded. */
interface ReplyRecording {
  active: boolean;
  readonly before: HeaderSnapshot;
  readonly hooks: RecorderHooks;
}

/**
 * Where a reply keeps its recording. Declared on every reply of the application (`null`), so that
 * setting it does not change a reply's shape, and its presence says that the `onSend` hook runs.
 */
const RECORDING = Symbol('idempotency reply recording');

/** The parts of Fastify's instance and reply used here. */
export interface FastifyInstanceLike {
  addHook(name: 'onSend', hook: typeof recordOnSend): unknown;
  decorateReply(name: symbol, value: null): unknown;
  hasReplyDecorator(name: symbol): boolean;
}
interface RecordedReply {
  [RECORDING]?: ReplyRecording | null;
  readonly raw: ServerResponse;
  statusCode: number;
  getHeaders(): Record<string, unknown>;
  removeHeader(name: string): unknown;
  header(name: string, value: unknown): unknown;
}
type Done = (err: Error | null, payload?: unknown) => void;

const EMPTY = Buffer.alloc(0);

function isStream(payload: unknown): boolean {
  if (typeof payload !== 'object' || payload === null) return false;
  const p = payload as { pipe?: unknown; getReader?: unknown };
  return typeof p.pipe === 'function' || typeof p.getReader === 'function';
}

function bodyOf(payload: unknown): Buffer {
  if (payload === undefined || payload === null) return EMPTY;
  // What reaches onSend is a string or a Buffer (Fastify turns a typed array into a Buffer first).
  return Buffer.isBuffer(payload) ? payload : Buffer.from(String(payload as string));
}

/** Puts `response` on the reply in place of what the handler produced; headers set since `before` go. */
function sendInstead(reply: RecordedReply, response: StoredResponse, before: HeaderSnapshot): Buffer {
  for (const name of Object.keys(reply.getHeaders())) if (!(name in before)) reply.removeHeader(name);
  reply.statusCode = response.status;
  for (const name of Object.keys(response.headers)) reply.header(name, response.headers[name]);
  return response.body;
}

/**
 * Fastify's `onSend` hook, added once per application: it sees the serialised payload, status and
 * headers after every other `onSend` hook added before it (compression included), and Fastify
 * writes nothing until it goes on, so the record is stored before the client can retry and `onEnd`
 * can still replace the whole reply. A reply not being recorded passes at once.
 */
export function recordOnSend(
  this: unknown,
  _request: unknown,
  reply: RecordedReply,
  payload: unknown,
  done: Done,
): Promise<unknown> | undefined {
  const recording = reply[RECORDING];
  if (!recording?.active) {
    done(null, payload);
    return undefined;
  }
  recording.active = false;
  if (isStream(payload)) {
    recording.hooks.onStream();
    done(null, payload);
    return undefined;
  }
  const { before } = recording;
  const headers: Record<string, string | string[]> = {};
  addHeaders(headers, reply.getHeaders() as Parameters<typeof addHeaders>[1], before);
  const response: StoredResponse = { status: reply.statusCode, headers, body: bodyOf(payload) };
  // Returned rather than handed to `done`: Fastify then catches what its writing throws (a reply
  // that other code sent meanwhile), where an error thrown from `done` here would go unhandled.
  return recording.hooks.onEnd(response).then(
    (instead) => (instead && !reply.raw.headersSent ? sendInstead(reply, instead, before) : payload),
    () => payload,
  );
}

/**
 * Adds the hook to a Fastify application, before it is ready. `false` when it cannot (the instance
 * is ready already): its replies are then recorded on Node's response, as Express's are.
 */
export function installReplyRecorder(instance: FastifyInstanceLike): boolean {
  if (instance.hasReplyDecorator(RECORDING)) return true;
  try {
    // The hook first: a reply that claims a recording must pass through it.
    instance.addHook('onSend', recordOnSend);
    instance.decorateReply(RECORDING, null);
    return true;
  } catch {
    return false;
  }
}

/** Whether `reply` belongs to an application with the hook. */
export function canRecordReply(reply: object): boolean {
  return (reply as RecordedReply)[RECORDING] !== undefined;
}

/** Records one reply through the hook; `canRecordReply(reply)` must hold. */
export function recordReply(reply: object, before: HeaderSnapshot, hooks: RecorderHooks): ResponseRecording {
  const recording: ReplyRecording = { active: true, before, hooks };
  (reply as RecordedReply)[RECORDING] = recording;
  return {
    stop: () => {
      recording.active = false;
    },
  };
}
