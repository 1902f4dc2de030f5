/** DI token of the resolved {@link IdempotencyModuleOptions}. */
export const IDEMPOTENCY_MODULE_OPTIONS = Symbol('IDEMPOTENCY_MODULE_OPTIONS');
/** DI token of the core's `RecordSealer` (encryption of stored responses). */
export const RECORD_SEALER = Symbol('RECORD_SEALER');
/** DI token of the transports `@Idempotent()` dispatches to, by execution-context type. */
export const IDEMPOTENCY_TRANSPORTS = Symbol('IDEMPOTENCY_TRANSPORTS');

/** Metadata key under which `@Idempotent()` stores its per-route options. */
export const IDEMPOTENT_ROUTE_METADATA = 'nestjs-idempotency:route';
/** Metadata key of `@PhasedWorkflow()`: the workflow's name on its method. */
export const PHASED_WORKFLOW_METADATA = 'nestjs-idempotency:workflow';
/** The recovery point's name for the result of `finish()` once a completer ran it (no phase may take it). */
export const FINISHED = 'finish()';

/**
 * Safe methods (RFC 9110 §9.2.1) change nothing, so there is nothing to deduplicate: `@Idempotent()`
 * on a route of one is refused at bootstrap, and an `@All()` route passes them through untouched.
 */
export const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'SEARCH', 'PROPFIND', 'QUERY']);

/** Header added to every replayed response by default (the Stripe convention); see `replayedHeader`. */
export const REPLAYED_HEADER = 'idempotent-replayed';

/**
 * What a browser app's CORS set-up needs for this module with its default header names: `allowed`
 * lets it send the key (a preflight asks for it), `exposed` lets its script read the replay mark and
 * `Retry-After`. Add them to your own lists (`Content-Type` and the rest):
 * `app.enableCors({ allowedHeaders: ['Content-Type', ...IDEMPOTENCY_CORS_HEADERS.allowed], exposedHeaders: [...IDEMPOTENCY_CORS_HEADERS.exposed] })`.
 * With `headerName` or `replayedHeader` changed, list those names instead.
 */
export const IDEMPOTENCY_CORS_HEADERS: Readonly<{ allowed: readonly string[]; exposed: readonly string[] }> = Object.freeze({
  allowed: Object.freeze(['Idempotency-Key']),
  exposed: Object.freeze(['Idempotent-Replayed', 'Retry-After']),
});

/** Sent with 409 and 503: both clear up by themselves, so the client should retry after a pause. */
export const RETRY_AFTER: Readonly<Record<string, string>> = { 'retry-after': '1' };
/** The extra headers of an answer that needs none. */
export const NO_HEADERS: Readonly<Record<string, string>> = {};

export const DEFAULT_TTL_MS = 86_400_000;
export const DEFAULT_LEASE_MS = 60_000;
/** The fixed lease of a transactional route. */
export const DEFAULT_TRANSACTION_TIMEOUT_MS = 30_000;
/** How long a duplicate waits with `inFlight: 'wait'`. */
export const DEFAULT_WAIT_MS = 5_000;
/** Duplicates waiting at once per process with `inFlight: 'wait'`. */
export const DEFAULT_MAX_WAITERS = 1_000;
/** `maxMutationsPerRequest`: idempotent mutations one GraphQL request may claim keys for (aliases make thousands fit in 100 KB). */
export const DEFAULT_MAX_MUTATIONS_PER_REQUEST = 10;
/** How long a claim is renewed for a handler that has not finished (10 min, or `leaseMs` when longer). */
export const DEFAULT_MAX_HOLD_MS = 600_000;
/** The completer's defaults: a pass a minute, runs idle for a minute, ten runs a pass. */
export const DEFAULT_COMPLETER = { intervalMs: 60_000, idleMs: 60_000, batch: 10 } as const;
/** The longest delay Node's timers can wait (2^31 - 1 ms, about 24.8 days); past it they fire after 1 ms. */
export const MAX_TIMER_MS = 2_147_483_647;
/** The longest `ttlMs`: 365 days. */
export const MAX_TTL_MS = 31_536_000_000;
/** The largest response body kept for replay by default: 8 MiB. */
export const DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024;
/** The largest `maxResponseBytes`: 512 MiB, Redis's largest value. */
export const MAX_RESPONSE_BYTES = 512 * 1024 * 1024;
export const DEFAULT_HEADER_NAME = 'idempotency-key';
/** Identifiers, not links: `errorFormat: 'problem+json'` users point `problemTypeBaseUrl` at their docs. */
export const DEFAULT_PROBLEM_TYPE_BASE_URL = 'urn:nestjs-idempotency:problem:';
export const DEFAULT_KEY_PREFIX = 'idem:';
export const DEFAULT_MAX_KEY_LENGTH = 255;
export const DEFAULT_MAX_SCOPE_LENGTH = 255;

/**
 * Metadata keys of @nestjs/common (stable strings of its `constants.js`). They are read, not written,
 * to refuse handlers at bootstrap whose responses cannot be captured; `@nestjs/common/internal`
 * exports them too, but is marked as not for use outside Nest.
 */
export const NEST_ROUTE_ARGS_METADATA = '__routeArguments__';
export const NEST_RESPONSE_PASSTHROUGH_METADATA = '__responsePassthrough__';
export const NEST_SSE_METADATA = '__sse__';
/** `HTTP_CODE_METADATA`: the status `@HttpCode()` sets. */
export const NEST_HTTP_CODE_METADATA = '__httpCode__';
/** `PATTERN_METADATA` of @nestjs/microservices: what `@MessagePattern()` / `@EventPattern()` set. */
export const NEST_PATTERN_METADATA = 'microservices:pattern';
/** `HOST_METADATA`: the host (or hosts) `@Controller({ host })` routes by. */
export const NEST_HOST_METADATA = 'host';
/** @nestjs/graphql's `RESOLVER_TYPE_METADATA` on a resolver method: 'Mutation', 'Query', 'Subscription', … */
export const GRAPHQL_RESOLVER_TYPE_METADATA = 'graphql:resolver_type';
/** `METHOD_METADATA`: the route's `RequestMethod`. */
export const NEST_METHOD_METADATA = 'method';
/** `RouteParamtypes.RESPONSE` and `RouteParamtypes.NEXT`. */
export const NEST_RESPONSE_PARAM_TYPES: readonly number[] = [1, 2];
/** How long a RabbitMQ delivery waits before it is requeued: a duplicate in flight; a failed handler's first failure. */
export const REQUEUE_DELAY_MS = 1_000;
/**
 * The longest pause before a failed message is requeued: the pause doubles from {@link REQUEUE_DELAY_MS}
 * with each failure up to this, so the default attempts span more than a minute of a downstream outage.
 */
export const MAX_REQUEUE_DELAY_MS = 30_000;
/**
 * `maxAttempts` of a message handler with `ack: true`: deliveries of one id that may fail before it is
 * rejected. Eight attempts with the doubling pause span 1+2+4+8+16+30+30 = 91 s.
 */
export const DEFAULT_MAX_ATTEMPTS = 8;
/** `PATTERN_HANDLER_METADATA` and `TRANSPORT_METADATA` of @nestjs/microservices: an event handler, and the transport it is for. */
export const NEST_PATTERN_HANDLER_METADATA = 'microservices:handler_type';
export const NEST_TRANSPORT_METADATA = 'microservices:transport';
/** `PatternHandler.EVENT` and `Transport.RMQ` of @nestjs/microservices. */
export const NEST_EVENT_HANDLER = 2;
export const NEST_RMQ_TRANSPORT = 5;
/** How many message ids the acknowledger counts failed attempts of, per process; the oldest is forgotten first. */
export const ATTEMPT_COUNTS = 10_000;
