import { type CallHandler, type ExecutionContext, Injectable, Logger, type NestInterceptor } from '@nestjs/common';
import { Observable } from 'rxjs';
import { rememberKey } from './http/request-key.store.js';
import type { HttpRequestLike } from './http/request.reader.js';
import { HandlerRun, responseStart } from './http/handler.run.js';
import { HttpContext, type HttpReaders } from './http/http.context.js';
import { setHeader } from './http/response.adapter.js';
import { IdempotencyException } from './exceptions/idempotency.exception.js';
import { GraphqlRunner } from './graphql.runner.js';
import { SAFE_METHODS } from './idempotency.constants.js';
import { LOGS } from './idempotency.messages.js';
import { IdempotencyService } from './idempotency.service.js';
import { IdentityResolverLoader } from './identity-resolver.loader.js';
import type { ActiveClaim } from './interfaces/active-claim.interface.js';
import type { StoredResponse } from './interfaces/stored-response.interface.js';
import { LeaseRenewer } from './lease.renewer.js';
import { MessageRunner } from './message.runner.js';
import { RequestFingerprinter } from './request.fingerprinter.js';
import { RouteOptionsRegistry } from './route-options.registry.js';
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
  private readonly readers: HttpReaders;

  constructor(
    private readonly service: IdempotencyService,
    private readonly routes: RouteOptionsRegistry,
    private readonly leases: LeaseRenewer,
    private readonly transactions: TransactionRunner,
    private readonly messages: MessageRunner,
    private readonly graphql: GraphqlRunner,
    identities: IdentityResolverLoader,
    fingerprints: RequestFingerprinter,
  ) {
    this.readers = { options: service.options, identities, fingerprints };
  }

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const type = context.getType<string>();
    if (type !== 'http') {
      const runner = type === 'rpc' ? this.messages : type === 'graphql' ? this.graphql : undefined;
      return runner ? runner.handle(context, next, this.routes.resolve(context.getClass(), context.getHandler())) : next.handle();
    }
    const http = context.switchToHttp();
    const request = http.getRequest<HttpRequestLike>();
    // An @All() route also serves safe methods, which have nothing to deduplicate.
    if (SAFE_METHODS.has(request.method)) return next.handle();
    const response = http.getResponse<object>();
    const route = this.routes.resolve(context.getClass(), context.getHandler());
    const { options } = this.service;
    const call = new HttpContext(request, context, response, this.readers);
    let claim: ActiveClaim | undefined;
    try {
      if (this.leases.draining) throw this.service.shuttingDown();
      claim = await this.service.begin(call, route);
    } catch (err) {
      if (options.echoKeyHeader && !isKeyError(err)) echoKey(request, response, options.headerName);
      call.answer(err);
      throw err;
    }
    if (!claim) return next.handle();
    if (route.readsKey) rememberKey(request, claim.key);
    // Set before the response is recorded, so the record does not keep it: a replay echoes its own.
    if (options.echoKeyHeader) echoKey(request, response, options.headerName);
    return route.transactional ? this.transactions.run(claim, response, next) : this.run(claim, response, next);
  }

  private run(claim: ActiveClaim, response: object, next: CallHandler): Observable<unknown> {
    const start = responseStart(response);
    this.leases.hold(claim);

    // One subscriber rather than a chain of operators: this runs on every decorated request.
    return new Observable<unknown>((subscriber) => {
      let settled = false; // the key was committed, released or given up

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
      const storeResult = (): Promise<void> => (settled ? Promise.resolve() : commit(run.rendered()));

      const run = new HandlerRun(start, claim.route, this.logger, {
        ended: commit,
        // A compressed Fastify reply is stored as its handler's value; a replay goes through the
        // reply, and the plugin encodes it as the retry negotiates.
        streamed: () => (run.encodedByFastify() ? void storeResult() : giveUp(LOGS.streamed)),
      });

      run.subscribe(next, subscriber, {
        stream: () => {
          run.stop();
          giveUp(LOGS.returnedStream);
          return true;
        },
        // A thrown error frees the key before the error response goes out, so a retry runs again.
        error: (err) => {
          run.stop();
          void settle(this.service.release(claim)).then(() => subscriber.error(err));
        },
        complete: () => {
          if (run.detached) void storeResult();
          subscriber.complete();
        },
      });
      return run.teardown;
    });
  }
}
