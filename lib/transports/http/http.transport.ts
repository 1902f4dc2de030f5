import { type CallHandler, type ExecutionContext, Injectable, Logger } from '@nestjs/common';
import { Observable } from 'rxjs';
import { rememberKey } from './request-key.store.js';
import type { HttpRequestLike } from '../../shared/http/http-request.js';
import { responseStart } from './handler.run.js';
import { HttpContext, type HttpReaders } from './http.context.js';
import { setHeader } from '../../shared/http/response.adapter.js';
import { CommitSettlement } from './commit.settlement.js';
import { IdempotencyException } from '../../shared/exceptions/idempotency.exception.js';
import { SAFE_METHODS } from '../../shared/idempotency.constants.js';
import { IdempotencyService } from '../../core/idempotency.service.js';
import { IdentityResolverLoader } from '../../core/identity-resolver.loader.js';
import type { ActiveClaim } from '../../shared/interfaces/active-claim.interface.js';
import type { IdempotencyTransport } from '../../core/idempotency-transport.interface.js';
import type { ResolvedRouteOptions } from '../../shared/interfaces/resolved-options.interface.js';
import { LeaseRenewer } from '../../core/lease.renewer.js';
import { CommitSettler } from '../../core/commit.settler.js';
import { PhasedRunner } from './phased.runner.js';
import type { PhasedRun } from '../../core/phases/phased.run.js';
import { RequestFingerprinter } from './request.fingerprinter.js';
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
 * `@Idempotent()` on HTTP routes (Express and Fastify). It runs after guards (so identity resolvers see
 * `req.user`) and inside every global and controller interceptor, and records what finally leaves the
 * server.
 *
 * Its own answers (replays, 4xx, 503) are written here, then thrown on: outer interceptors see an
 * exception (so success-only work, like publishing an event, does not run again for a replay), and
 * whichever filter catches it can no longer change what was sent.
 */
@Injectable()
export class HttpTransport implements IdempotencyTransport {
  readonly contextType = 'http';
  private readonly logger = new Logger('Idempotency');
  private readonly readers: HttpReaders;

  constructor(
    private readonly service: IdempotencyService,
    private readonly leases: LeaseRenewer,
    private readonly transactions: TransactionRunner,
    private readonly phased: PhasedRunner,
    private readonly plain: CommitSettler,
    identities: IdentityResolverLoader,
    fingerprints: RequestFingerprinter,
  ) {
    this.readers = { options: service.options, identities, fingerprints };
  }

  async handle(context: ExecutionContext, next: CallHandler, route: ResolvedRouteOptions): Promise<Observable<unknown>> {
    const http = context.switchToHttp();
    const request = http.getRequest<HttpRequestLike>();
    // An @All() route also serves safe methods, which have nothing to deduplicate.
    if (SAFE_METHODS.has(request.method)) return next.handle();
    const response = http.getResponse<object>();
    const { options } = this.service;
    const call = new HttpContext(request, context, response, this.readers);
    let claim: ActiveClaim | undefined;
    let phases: PhasedRun | undefined;
    try {
      if (this.leases.draining) throw this.service.shuttingDown();
      claim = await this.service.begin(call, route);
      if (claim && route.settling === 'phases') phases = await this.phased.resume(call, claim, route);
    } catch (err) {
      if (options.echoKeyHeader && !isKeyError(err)) echoKey(request, response, options.headerName);
      call.answer(err);
      throw err;
    }
    if (!claim) return next.handle();
    if (route.readsKey) rememberKey(request, claim.key);
    // Set before the response is recorded, so the record does not keep it: a replay echoes its own.
    if (options.echoKeyHeader) echoKey(request, response, options.headerName);
    if (phases) return this.phased.run(claim, phases, request, response, next);
    return route.settling === 'transaction' ? this.transactions.run(claim, response, next) : this.run(claim, response, next);
  }

  private run(claim: ActiveClaim, response: object, next: CallHandler): Observable<unknown> {
    const start = responseStart(response);
    this.plain.hold(claim);
    // One subscriber and one object for the run, not a chain of operators or a closure per step:
    // this runs on every first request. The run is the teardown (its unsubscribe()).
    return new Observable<unknown>((subscriber) => {
      const settlement = new CommitSettlement(this.plain, this.logger, claim, subscriber, start);
      settlement.run.subscribe(next, subscriber, settlement);
      return settlement.run;
    });
  }
}
