import { type CallHandler, type ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { lastValueFrom, type Observable, of } from 'rxjs';
import { GraphqlRefusal } from './exceptions/graphql-refusal.exception.js';
import { IdempotencyException } from './exceptions/idempotency.exception.js';
import { GraphqlContext } from './graphql/graphql.context.js';
import { markReplayed } from './graphql/replay-marks.js';
import { sentHeader, type HttpRequestLike } from './http/request.reader.js';
import { setHeader } from './http/response.adapter.js';
import { IDEMPOTENCY_MODULE_OPTIONS } from './idempotency.constants.js';
import { MESSAGES } from './messages/client.messages.js';
import { IdentityResolverLoader } from './identity-resolver.loader.js';
import { InboxRunner } from './inbox.runner.js';
import type { ResolvedIdempotencyOptions, ResolvedRouteOptions } from './interfaces/resolved-options.interface.js';

/**
 * The GraphQL context object: Apollo's on Express (`req`, `res`) or Fastify (`request`, `reply`),
 * Mercurius's (its `reply`, whose `request` is the request).
 */
interface GraphqlRequestContext {
  req?: HttpRequestLike;
  request?: HttpRequestLike;
  res?: object;
  reply?: { request?: HttpRequestLike };
}

/**
 * Runs an `@Idempotent()` GraphQL mutation resolver once per key: the key is the GraphQL request's
 * key header (or what `keyFrom` reads of the arguments), scoped by the module's identity resolver on
 * the request; the resolver's value is stored as JSON and a retry gets it back — its selected fields
 * are then resolved from it — with the `Idempotent-Replayed` header and, with
 * `idempotencyApolloPlugin()`, an `extensions.idempotency.replayed` entry. The module's refusals are
 * GraphQL errors whose `extensions` are `{ code, status, retryable }`.
 */
@Injectable()
export class GraphqlRunner {
  /** Keyed mutations so far per HTTP request: dropped with the request. */
  private readonly claims = new WeakMap<object, number>();

  constructor(
    private readonly inbox: InboxRunner,
    private readonly identities: IdentityResolverLoader,
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  async handle(context: ExecutionContext, next: CallHandler, route: ResolvedRouteOptions): Promise<Observable<unknown>> {
    const [, args, gql, info] =
      context.getArgs<[unknown, unknown, GraphqlRequestContext, { fieldName: string; path: { key: string } }]>();
    const request = gql.req ?? gql.request ?? gql.reply?.request;
    const { keyFrom } = route.graphql!;
    const key = keyFrom ? keyFrom(args, context) : request && sentHeader(request, this.options.headerName);
    try {
      if (typeof key !== 'string' || key === '') {
        if (route.missingHeader === 'pass-through') return next.handle();
        throw IdempotencyException.of('key-missing', keyFrom ? MESSAGES.argumentKey : MESSAGES.missing(this.options.headerName));
      }
      this.count(request ?? gql);
      // Without a request (a context of the application's own) an identity resolver gets undefined.
      const scoped = (r: ResolvedRouteOptions) => this.identities.scopeOf(request as HttpRequestLike, context, r);
      const call = new GraphqlContext(key, info.fieldName, args, scoped);
      const work = (): Promise<unknown> => lastValueFrom(next.handle(), { defaultValue: undefined });
      const done = await this.inbox.run(route, call, work);
      if (done.duplicate) this.replayed(gql, info.path.key);
      return of(done.value);
    } catch (err) {
      throw err instanceof IdempotencyException && err.code ? new GraphqlRefusal(err) : err;
    }
  }

  /**
   * Counts a keyed mutation against its HTTP request (a batch's operations share it): aliases fit
   * thousands into one document, each a claim and a record kept for the ttl, which on InMemoryStore
   * could evict another client's record. Past `maxMutationsPerRequest` a mutation is refused unrun.
   */
  private count(request: object): void {
    const made = (this.claims.get(request) ?? 0) + 1;
    this.claims.set(request, made);
    const max = this.options.maxMutationsPerRequest;
    if (made > max) throw IdempotencyException.of('too-many-mutations', MESSAGES.tooManyMutations(max));
  }

  private replayed(gql: GraphqlRequestContext, field: string): void {
    markReplayed(gql, field);
    const response = gql.res ?? gql.reply;
    const { replayedHeader } = this.options;
    if (response && replayedHeader) setHeader(response, replayedHeader, 'true');
  }
}
