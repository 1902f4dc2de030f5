import { type CallHandler, type ExecutionContext, Injectable, Logger, type NestInterceptor } from '@nestjs/common';
import { Observable } from 'rxjs';
import { rememberKey } from './http/request-key.store.js';
import type { HttpRequestLike } from './http/request.reader.js';
import { identityOf } from './http/identity-body.js';
import { recordResponse } from './http/response.recorder.js';
import { currentHeaders, isFastifyReply, rawResponse, setHeader } from './http/response.adapter.js';
import type { HeaderSnapshot } from './http/stored-headers.js';
import { renderValue } from './http/value.renderer.js';
import { IdempotencyException } from './exceptions/idempotency.exception.js';
import { answer, isStream } from './idempotency.answers.js';
import { SAFE_METHODS } from './idempotency.constants.js';
import { LOGS } from './idempotency.messages.js';
import { IdempotencyService } from './idempotency.service.js';
import type { ActiveClaim } from './interfaces/active-claim.interface.js';
import type { StoredResponse } from './interfaces/stored-response.interface.js';
import { LeaseRenewer } from './lease.renewer.js';
import { RouteOptionsAccessor } from './route-options.accessor.js';
import { TransactionRunner } from './transaction.runner.js';

/** A 400 for the key itself: a key that is missing or invalid is not echoed. */
function isKeyError(err: unknown): boolean {
  return err instanceof IdempotencyException && (err.code === 'key-missing' || err.code === 'key-invalid');
}

/** Repeats the key header as the client sent it (`echoKeyHeader`); it has passed the key rules. */
function echoKey(request: HttpRequestLike, response: object, headerName: string): void {
  setHeader(response, headerName, request.headers[headerName] as string);
}

/**
 * Applied by `@Idempotent()`. Runs after guards (so identity resolvers see `req.user`) and inside
 * every global and controller interceptor, and records what finally leaves the server.
 *
 * Its own answers (replays, 4xx, 503) are written here, then thrown on: outer interceptors see an
 * exception (so success-only work, like publishing an event, does not run again for a replay), and
 * whichever filter catches it can no longer change what was sent.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly logger = new Logger('Idempotency');

  constructor(
    private readonly service: IdempotencyService,
    private readonly routes: RouteOptionsAccessor,
    private readonly leases: LeaseRenewer,
    private readonly transactions: TransactionRunner,
  ) {}

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    if (context.getType() !== 'http') return next.handle();
    const http = context.switchToHttp();
    const request = http.getRequest<HttpRequestLike>();
    // An @All() route also serves safe methods, which have nothing to deduplicate.
    if (SAFE_METHODS.has(request.method)) return next.handle();
    const response = http.getResponse<object>();
    const route = this.routes.get(context.getClass(), context.getHandler());
    const { options } = this.service;
    let claim: ActiveClaim | undefined;
    try {
      if (this.leases.draining) throw this.service.shuttingDown();
      claim = await this.service.begin(request, context, route);
    } catch (err) {
      if (options.echoKeyHeader && !isKeyError(err)) echoKey(request, response, options.headerName);
      answer(response, err, options);
      throw err;
    }
    if (!claim) return next.handle();
    rememberKey(request, claim.key);
    // Set before the response is recorded, so the record does not keep it: a replay echoes its own.
    if (options.echoKeyHeader) echoKey(request, response, options.headerName);
    return route.transactional ? this.transactions.run(claim, response, next) : this.run(claim, response, next);
  }

  private run(claim: ActiveClaim, response: object, next: CallHandler): Observable<unknown> {
    const raw = rawResponse(response);
    const adapter = isFastifyReply(response) ? 'fastify' : 'express';
    const before: HeaderSnapshot = currentHeaders(response);
    const statusBefore = raw.statusCode;
    this.leases.hold(claim);

    // One subscriber rather than a chain of operators: this runs on every decorated request.
    return new Observable<unknown>((subscriber) => {
      let finished = false; // the handler completed or failed
      let detached = false; // the chain around it was torn down, or answered, first
      let settled = false; // the key was committed, released or given up
      let last: unknown; // the handler's result: Nest sends the last value
      let status = 0;
      let headers: Record<string, unknown> = {};

      const unhold = (): void => this.leases.unhold(claim);
      const settle = (work: Promise<void>): Promise<void> => {
        settled = true;
        return work.finally(unhold);
      };
      // The lease stays held (and renewed) while a failed commit is tried again in the background.
      const commit = (stored: StoredResponse): Promise<void> => {
        settled = true;
        return this.service.commit(claim, stored, unhold);
      };
      const giveUp = (why: string): void => {
        if (settled) return;
        this.logger.warn(LOGS.givenUp(claim.route, why));
        void settle(this.service.release(claim, 'not-stored'));
      };
      // The handler's own result, as its adapter would have sent it. A stream has been given up
      // on already, as it was emitted.
      const storeResult = (): Promise<void> => {
        if (settled) return Promise.resolve();
        return commit(renderValue(last, status, headers, before, adapter));
      };
      const detach = (why: string): void => {
        if (detached) return;
        detached = true;
        recording.stop();
        this.logger.warn(LOGS.detached(claim.route, why));
      };

      const recording = recordResponse(raw, before, {
        onEnd: (stored: StoredResponse) => {
          if (!finished) {
            // An answer from outside the handler (a timeout middleware, Fastify's handlerTimeout).
            detach(LOGS.answeredOutside);
            return Promise.resolve();
          }
          // An outer layer failed after the handler succeeded: what goes out is its error, which is
          // never stored; a retry gets the handler's result.
          if (stored.status >= 400 && stored.status !== status) return storeResult();
          return commit(adapter === 'fastify' ? identityOf(stored) : stored);
        },
        // A compression plugin on Fastify (@fastify/compress) streams the encoded body: the handler's
        // value, rendered as Fastify serialises it, is the identity representation to store; a replay
        // goes through the reply, and the plugin encodes it as the retry negotiates.
        onStream: () =>
          adapter === 'fastify' && finished && !isStream(last) && raw.getHeader('content-encoding') !== undefined
            ? void storeResult()
            : giveUp(LOGS.streamed),
      });

      next.handle().subscribe({
        next: (value) => {
          if (isStream(value)) {
            recording.stop();
            giveUp(LOGS.returnedStream);
          }
          last = value;
          subscriber.next(value);
        },
        // A thrown error frees the key before the error response goes out, so a retry runs again.
        error: (err: unknown) => {
          finished = true;
          recording.stop();
          void settle(this.service.release(claim)).then(() => subscriber.error(err));
        },
        complete: () => {
          finished = true;
          // Once the response has gone out (an outer answer), the handler's part of it is unknown.
          status = raw.headersSent ? statusBefore : raw.statusCode;
          headers = raw.headersSent ? {} : currentHeaders(response);
          if (detached) void storeResult();
          subscriber.complete();
        },
      });
      return () => {
        if (finished) return;
        // Torn down first: Nest drops an Observable handler's chain when the client goes away, and
        // an outer timeout unsubscribes. The handler's side effects may have happened already, so
        // it is not cancelled: it finishes, and its result is what a retry gets.
        detach(LOGS.abandoned);
      };
    });
  }
}
