import { type CallHandler, type Logger, StreamableFile } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { Observer, Subscriber, Unsubscribable } from 'rxjs';
import { LOGS } from '../../shared/messages/operator.messages.js';
import type { StoredResponse } from '../../shared/interfaces/stored-response.interface.js';
import { identityOf } from './identity-body.js';
import { canRecordReply, recordReply } from './reply.recorder.js';
import { type RecorderHooks, recordResponse, type ResponseRecording } from './response.recorder.js';
import { type FastifyReplyLike, isFastifyReply } from '../../shared/http/response.adapter.js';
import type { HeaderSnapshot } from './stored-headers.js';
import { renderValue } from './value.renderer.js';

/** Whether a handler's value is a stream, which cannot be recorded. */
export function isStream(value: unknown): boolean {
  return (
    value instanceof StreamableFile ||
    (typeof value === 'object' && value !== null && typeof (value as { pipe?: unknown }).pipe === 'function')
  );
}

/** The response as it stood before the handler ran: taken when the route is entered, not when the run is subscribed. */
export interface ResponseStart {
  readonly response: object;
  readonly raw: ServerResponse;
  readonly adapter: 'express' | 'fastify';
  readonly before: HeaderSnapshot;
  readonly statusBefore: number;
}

export function responseStart(response: object): ResponseStart {
  // Asked once: on an Express response the question misses along a long prototype chain.
  if (isFastifyReply(response)) {
    const { raw } = response;
    return { response, raw, adapter: 'fastify', before: response.getHeaders(), statusBefore: raw.statusCode };
  }
  const raw = response as ServerResponse;
  return { response, raw, adapter: 'express', before: raw.getHeaders(), statusBefore: raw.statusCode };
}

/** The headers the response holds so far, for a start already told apart. */
function headersOf({ response, raw, adapter }: ResponseStart): Record<string, unknown> {
  return adapter === 'fastify' ? (response as FastifyReplyLike).getHeaders() : raw.getHeaders();
}

/** How a caller settles what the response does; the run has decided whose answer it is. */
export interface RunSettlement {
  /**
   * The response reached `end()` after the handler finished. `kept` is what a retry should get:
   * what went out, or the handler's own result when an outer layer failed after it. `end()` waits
   * for the promise; one that resolves to a response sends that instead (see `holdBack`).
   */
  ended(kept: StoredResponse): Promise<StoredResponse | void>;
  /** The response is being streamed: it will not reach `end()` whole. */
  streamed(): void;
}

/** What the handler does, as the caller settles it. */
export interface HandlerEvents {
  /** The handler emitted a stream, which cannot be recorded; `true` still passes it on to Nest. */
  stream(): boolean;
  error(err: unknown): void;
  /** The handler completed; its status and headers are taken. */
  complete(): void;
}

/**
 * One run of a handler under a claim, for each of the three ways an HTTP claim settles (a commit
 * after the run, the application's COMMIT, recovery points): records what goes out, keeps the
 * handler's last value, and knows when the chain around the handler was torn down (or answered)
 * before the handler finished.
 * Then the response that went out is not the handler's, and the handler's own value is what to store.
 */
export class HandlerRun implements RecorderHooks, Unsubscribable {
  /** The handler completed or failed. */
  finished = false;
  /** The chain around the handler was torn down, or answered, first. */
  detached = false;
  /** The handler's error is the answer to keep (an `atomicPhases` run it ended): what goes out for it is stored. */
  keepsError = false;
  /** The handler's result: Nest sends the last value. */
  private last: unknown = undefined;
  private status = 0;
  private headers: Record<string, unknown> = {};
  private readonly recording: ResponseRecording;
  /** Recorded by Fastify's onSend hook, which a write to Node's response bypasses. */
  private readonly byHook: boolean;
  private subscriber: Subscriber<unknown> | undefined = undefined;
  private events: HandlerEvents | undefined = undefined;

  constructor(
    private readonly start: ResponseStart,
    private readonly route: string,
    private readonly logger: Logger,
    private readonly settlement: RunSettlement,
    holdBack = false,
  ) {
    // On Fastify, its own onSend hook where the application has it: patching Node's response there
    // cost more than the rest of the recording (docs/performance.md). It can always replace the reply.
    this.byHook = start.adapter === 'fastify' && canRecordReply(start.response);
    this.recording = this.byHook
      ? recordReply(start.response, start.before, this)
      : recordResponse(start.raw, start.before, this, holdBack);
  }

  /** The recorder's: the response reached `end()`. */
  onEnd(stored: StoredResponse): Promise<StoredResponse | void> {
    if (!this.finished) {
      // An answer from outside the handler (a timeout middleware, Fastify's handlerTimeout).
      this.detach(LOGS.answeredOutside);
      return Promise.resolve();
    }
    // An outer layer failed after the handler succeeded: what goes out is its error, which is
    // never stored; a retry gets the handler's result.
    if (stored.status >= 400 && stored.status !== this.status && !this.keepsError) return this.settlement.ended(this.rendered());
    return this.settlement.ended(this.start.adapter === 'fastify' ? identityOf(stored) : stored);
  }

  /** The recorder's: the response is being streamed. */
  onStream(): void {
    this.settlement.streamed();
  }

  /** The handler's own result, as its adapter sends it: stored when what went out is not its answer. */
  rendered(): StoredResponse {
    const { before, adapter } = this.start;
    return renderValue(this.last, this.status, this.headers, before, adapter);
  }

  /**
   * A compression plugin on Fastify (@fastify/compress) streams the encoded body of a finished
   * handler's value: that value, rendered as Fastify serialises it, is the identity representation.
   */
  encodedByFastify(): boolean {
    // The reply's headers, Node's response's among them: the onSend hook sees the plugin's before they are written.
    return (
      this.start.adapter === 'fastify' &&
      this.finished &&
      !isStream(this.last) &&
      headersOf(this.start)['content-encoding'] !== undefined
    );
  }

  /** Stops recording: the response goes out untouched. */
  stop(): void {
    this.recording.stop();
  }

  detach(why: string): void {
    if (this.detached) return;
    this.detached = true;
    this.recording.stop();
    this.logger.warn(LOGS.detached(this.route, why));
  }

  /** Runs the handler, passing its values on to `subscriber`. */
  subscribe(next: CallHandler, subscriber: Subscriber<unknown>, events: HandlerEvents): void {
    this.subscriber = subscriber;
    this.events = events;
    next.handle().subscribe(new HandlerObserver(this));
  }

  /** The handler emitted `value`. */
  emitted(value: unknown): void {
    if (isStream(value) && !this.events!.stream()) return;
    this.last = value;
    this.subscriber!.next(value);
  }

  failed(err: unknown): void {
    this.finished = true;
    this.events!.error(err);
  }

  completed(): void {
    const { raw, statusBefore } = this.start;
    this.finished = true;
    // Once the response has gone out (an outer answer), the handler's part of it is unknown.
    this.status = raw.headersSent ? statusBefore : raw.statusCode;
    this.headers = raw.headersSent ? {} : headersOf(this.start);
    // Written to Node's response past the reply (by the handler, or a timeout): the hook never sees it.
    if (this.byHook && raw.headersSent) this.detach(LOGS.answeredOutside);
    this.events!.complete();
  }

  /**
   * The Observable's teardown. Torn down first: Nest drops an Observable handler's chain when the
   * client goes away, and an outer timeout unsubscribes. The handler's side effects may have happened
   * already, so it is not cancelled: it finishes, and its result is what a retry gets.
   */
  unsubscribe(): void {
    if (!this.finished) this.detach(LOGS.abandoned);
  }
}

/**
 * The handler's notifications, handed to the run. It keeps no state of its own, so it works with
 * whatever `this` rxjs calls it (its deprecated next context calls a copy).
 */
class HandlerObserver implements Observer<unknown> {
  constructor(private readonly run: HandlerRun) {}

  next(value: unknown): void {
    this.run.emitted(value);
  }

  error(err: unknown): void {
    this.run.failed(err);
  }

  complete(): void {
    this.run.completed();
  }
}
