import { type CallHandler, type ExecutionContext, Inject, Injectable, Logger } from '@nestjs/common';
import type { GraphQLResolveInfo } from 'graphql';
import { lastValueFrom, type Observable, of } from 'rxjs';
import { GraphqlRefusal } from '../../shared/exceptions/graphql-refusal.exception.js';
import { IdempotencyException } from '../../shared/exceptions/idempotency.exception.js';
import { fieldOutput, loadGraphqlJs } from './field-output.js';
import { replayField } from './field-replay.js';
import { GraphqlContext } from './graphql.context.js';
import { markReplayed } from './replay-marks.js';
import { sentHeader, type HttpRequestLike } from '../../shared/http/http-request.js';
import { setHeader } from '../../shared/http/response.adapter.js';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../../shared/idempotency.constants.js';
import { MESSAGES } from '../../shared/messages/client.messages.js';
import { LOGS } from '../../shared/messages/operator.messages.js';
import { IdentityResolverLoader } from '../../core/identity-resolver.loader.js';
import { InboxRunner } from '../../core/inbox.runner.js';
import type { IdempotencyTransport } from '../../core/idempotency-transport.interface.js';
import type { InboxResult } from '../../shared/interfaces/inbox-options.interface.js';
import type { ResolvedIdempotencyOptions, ResolvedRouteOptions } from '../../shared/interfaces/resolved-options.interface.js';

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

/** One HTTP request's keyed mutations: how many, and the run of each mutation and key. */
interface RequestRuns {
  claims: number;
  readonly runs: Map<string, Promise<InboxResult<unknown>>>;
}

/**
 * Runs an `@Idempotent()` GraphQL mutation resolver once per key: the key is the GraphQL request's
 * key header (or what `keyFrom` reads of the arguments), scoped by the module's identity resolver on
 * the request; what the client receives for the field (its selection resolved, its scalars
 * serialised) is stored, and a retry gets those bytes back with the `Idempotent-Replayed` header and, with
 * `idempotencyApolloPlugin()`, an `extensions.idempotency.replayed` entry. The module's refusals are
 * GraphQL errors whose `extensions` are `{ code, status, retryable }`.
 */
@Injectable()
export class GraphqlRunner implements IdempotencyTransport {
  readonly contextType = 'graphql';
  private readonly logger = new Logger('Idempotency');
  /** Keyed mutations so far per HTTP request: dropped with the request. */
  private readonly requests = new WeakMap<object, RequestRuns>();

  constructor(
    private readonly inbox: InboxRunner,
    private readonly identities: IdentityResolverLoader,
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  async handle(context: ExecutionContext, next: CallHandler, route: ResolvedRouteOptions): Promise<Observable<unknown>> {
    const [, args, gql, info] = context.getArgs<[unknown, unknown, GraphqlRequestContext, GraphQLResolveInfo]>();
    const request = gql.req ?? gql.request ?? gql.reply?.request;
    const { keyFrom } = route.graphql!;
    const key = keyFrom ? keyFrom(args, context) : request && sentHeader(request, this.options.headerName);
    try {
      if (typeof key !== 'string' || key === '') {
        if (route.missingHeader === 'pass-through') return next.handle();
        throw IdempotencyException.of('key-missing', keyFrom ? MESSAGES.argumentKey : MESSAGES.missing(this.options.headerName));
      }
      const mine = this.count(request ?? gql);
      // Without a request (a context of the application's own) an identity resolver gets undefined.
      const scoped = (r: ResolvedRouteOptions) => this.identities.scopeOf(request as HttpRequestLike, context, r);
      const call = new GraphqlContext(key, info.fieldName, args, scoped, !keyFrom);
      const js = await loadGraphqlJs();
      const work = async (): Promise<unknown> => {
        const value: unknown = await lastValueFrom(next.handle(), { defaultValue: undefined });
        // The mutation ran: whatever goes wrong now, its key must not be freed for a second run.
        return fieldOutput(js, value, info, gql).catch((err: unknown) => {
          this.logger.error(LOGS.graphqlOutputFailed(route.id, err instanceof Error ? err.message : String(err)));
          return value;
        });
      };
      // A batch's operations run at once: the same mutation and key twice in one request waits for
      // the first, and replays it, as the second of one document (run one after the other) does.
      const same = `${route.id}\n${key}`;
      const before = mine.runs.get(same);
      const run = (before ? before.catch(() => undefined) : Promise.resolve()).then(() => this.inbox.run(route, call, work));
      mine.runs.set(same, run);
      const done = await run;
      if (done.duplicate) this.replayed(gql, String(info.path.key));
      return of(replayField(js, done.value, info));
    } catch (err) {
      throw err instanceof IdempotencyException && err.code ? new GraphqlRefusal(err) : err;
    }
  }

  /**
   * Counts a keyed mutation against its HTTP request (a batch's operations share it): aliases fit
   * thousands into one document, each a claim and a record kept for the ttl, which on InMemoryStore
   * could evict another client's record. Past `maxMutationsPerRequest` a mutation is refused unrun.
   */
  private count(request: object): RequestRuns {
    let mine = this.requests.get(request);
    if (!mine) this.requests.set(request, (mine = { claims: 0, runs: new Map() }));
    const max = this.options.maxMutationsPerRequest;
    if (++mine.claims > max) throw IdempotencyException.of('too-many-mutations', MESSAGES.tooManyMutations(max));
    return mine;
  }

  private replayed(gql: GraphqlRequestContext, field: string): void {
    markReplayed(gql, field);
    const response = gql.res ?? gql.reply;
    const { replayedHeader } = this.options;
    if (response && replayedHeader) setHeader(response, replayedHeader, 'true');
  }
}
