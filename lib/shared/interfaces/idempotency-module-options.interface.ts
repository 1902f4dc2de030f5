import type { FactoryProvider, ModuleMetadata, Provider, Type } from '@nestjs/common';
import type { IdempotencyErrorBody } from './idempotency-error.interface.js';
import type { IdempotencyEncryption } from './idempotency-encryption.interface.js';
import type { IdempotencyEventsOption } from './idempotency-event.interface.js';
import type { IdempotencyStore } from '../../stores/contract/idempotency-store.interface.js';
import type { IdempotencyTransactions } from './idempotency-transactions.interface.js';
import type {
  ErrorFormat,
  FingerprintMode,
  InFlightPolicy,
  MissingHeaderPolicy,
  ReplayFlag,
} from './idempotent-options.interface.js';
import type { IdempotencyIdentity } from './identity-resolver.interface.js';

/** Options of `IdempotencyModule`. Every one is optional. */
export interface IdempotencyModuleOptions {
  /**
   * Where keys and responses are kept. Default: a new `InMemoryStore` for this module (state per
   * process). Several pods need `RedisStore`, `PostgresStore` or `SqliteStore` (one host). Give
   * idempotency a store of its own: see docs/guides/stores.md.
   */
  store?: IdempotencyStore;
  /** @deprecated The same as `store`, its earlier name: it still works, with one warning. */
  cache?: IdempotencyStore;
  /** How long a completed key is remembered, in ms. Default 86 400 000 (24 h); at most 365 days. */
  ttlMs?: number;
  /**
   * How long a claim outlives a crashed request, in ms. Renewed every third of it while the handler
   * runs, so a slow handler keeps its key. Default 60 000; from 3 to 2 147 483 647 (Node's longest timer).
   */
  leaseMs?: number;
  /**
   * How long a handler that has not finished keeps its key, in ms: after it the lease is no longer
   * renewed, lapses, and a retry can take the key over (a warning names the route).
   * Default 600 000 (10 min) or `leaseMs` when that is longer; from `leaseMs` to 2 147 483 647.
   */
  maxHoldMs?: number;
  /**
   * The largest response body kept for replay, in bytes. A larger one still goes to its client, but
   * the key keeps a small record instead: retries get the first response's status with a short JSON
   * body (code `response-too-large`) for the ttl, and the handler never runs again. It bounds what a
   * commit and a replay move through the store. Default 8 MiB (8 388 608).
   */
  maxResponseBytes?: number;
  /** Request header carrying the key, matched case-insensitively. Default `'idempotency-key'`. */
  headerName?: string;
  /** Namespace of this module's cache keys. Default `'idem:'`. */
  keyPrefix?: string;
  /** Longest accepted key, in characters; longer ones get 400. Default 255 (Stripe's limit). */
  maxKeyLength?: number;
  /** Longest accepted identity scope, in characters (`%` and `:` count 3: they are escaped). Default 255. */
  maxScopeLength?: number;
  /** What to do when a request has no key (or only white space). Default `'reject'` (400). */
  missingHeader?: MissingHeaderPolicy;
  /** What the body part of the fingerprint is made of. Default `'canonical'`; see `fingerprint` of `IdempotentOptions`. */
  fingerprint?: FingerprintMode;
  /**
   * The body of the module's own errors (400, 409, 415, 422, 500, 503). `'json'` (default):
   * `{"error": "<sentence>"}`. `'problem+json'`: RFC 9457 problem details, `application/problem+json`
   * with `type`, `title`, `status` and `detail` (the same sentence), as the IETF draft recommends.
   */
  errorFormat?: ErrorFormat;
  /**
   * Prefix of each problem's `type` URI; the error's code (`key-missing`, `key-reused`, …) follows
   * it. Default `'urn:nestjs-idempotency:problem:'` (identifiers, not links): point it at your API's
   * documentation, e.g. `'https://api.example.com/problems/'`.
   */
  problemTypeBaseUrl?: string;
  /**
   * Builds the body of the module's own errors in your API's shape instead; `errorFormat` still
   * decides the content type. It is given `{ status, code, message }` and its result is written as
   * JSON. If it throws or returns something JSON cannot write, the default body is sent and the
   * failure logged: an error answer never becomes a 500. See docs/guides/clients.md.
   */
  errorBody?: IdempotencyErrorBody;
  /**
   * Repeat the request's key, as sent, in the same header of the response: on the first response, on
   * replays and on every error but the 400 for a missing or invalid key. Stripe and Adyen do this
   * (the Stripe SDK reads it into `lastResponse.idempotencyKey`). Default `false`.
   */
  echoKeyHeader?: boolean;
  /**
   * With `@nestjs/swagger` installed, document every `@Idempotent()` route in the OpenAPI document:
   * the key header, the expiry policy, the 400/409/422/503 answers, the replay header. Default
   * `true`; nothing is loaded without `@nestjs/swagger`. See docs/standards.md.
   */
  openApi?: boolean;
  /**
   * Called with the outcome of every decorated request (`executed`, `replayed`, `conflict`, …) and
   * with `lease-lost` and `evicted`: a function, or an injectable class with
   * `onIdempotencyEvent(event)` (built by the container, so it can inject). Called after the response
   * decision, never awaited; what it throws is logged. Events carry a SHA-256 of the key, never the
   * key or the body. See docs/guides/operations.md.
   */
  events?: IdempotencyEventsOption;
  /**
   * Seal every stored response (status, headers, body) with AES-256-GCM before it reaches the store:
   * `{ keys: { [id]: 32-byte Buffer }, current: id }`. The store keeps the fingerprint (a hash), the
   * key id and ciphertext, never the response. A record that fails authentication or names a key no
   * longer listed is answered 503 (never replayed, never run again). Default: off. See
   * docs/guides/operations.md, "Encryption at rest".
   */
  encryption?: IdempotencyEncryption;
  /**
   * With `@opentelemetry/api` installed, count outcomes (`idempotency.requests`), time store calls
   * (`idempotency.store.duration`) and set `idempotency.outcome` on the active span. Default `true`;
   * nothing is loaded without the package, and without an SDK registered the API does nothing.
   */
  openTelemetry?: boolean;
  /**
   * How a replay is marked: `'header'` (default) adds the `replayedHeader`; `'body'` adds
   * `"replayed": true` to a JSON object body instead; `'header-and-body'` does both.
   */
  replayFlag?: ReplayFlag;
  /**
   * The header that marks a replay (peers spell it `Idempotent-Replayed`, `Idempotency-Replayed`,
   * `X-Idempotent-Replayed`, …). Default `'idempotent-replayed'`; `false` sends none.
   */
  replayedHeader?: string | false;
  /** Caller scope folded into every key. Default: none (callers sharing a key share its response). */
  identity?: IdempotencyIdentity;
  /**
   * How `@Idempotent({ transactional: true })` routes open their database transaction, e.g.
   * `clsTransactions(txHost)`. Needed by those routes only; they also need `store: new PostgresStore(...)`.
   */
  transactions?: IdempotencyTransactions;
  /**
   * The fixed lease of a transactional route, in ms: the longest its handler and transaction may take.
   * Never renewed (a renewal would break a REPEATABLE READ or SERIALIZABLE transaction); past it the
   * transaction rolls back and the client gets 409. Default 30 000; from 3 to 2 147 483 647.
   */
  transactionTimeoutMs?: number;
  /**
   * What a duplicate of a request still running gets. `'conflict'` (default): 409 at once, and the
   * client retries. `'wait'`: it waits up to `waitMs` and is woken when the first settles: the replay,
   * or the handler's run if the first released the key, or 409 when the wait runs out. See
   * docs/guides/waiting-duplicates.md. HTTP routes and GraphQL mutations; message handlers always refuse.
   */
  inFlight?: InFlightPolicy;
  /** With `inFlight: 'wait'`: the longest a duplicate waits, in ms. Default 5 000; from 1 to 2 147 483 647. */
  waitMs?: number;
  /** With `inFlight: 'wait'`: duplicates waiting at once in this process; one more gets 409 at once. Default 1 000. */
  maxWaiters?: number;
  /**
   * GraphQL: the most idempotent mutations one HTTP request (a document, or a batch of them) may run
   * with a key; each is a claim and a record kept for `ttlMs`. The ones past it get a GraphQL error
   * with code `too-many-mutations` and are not run. Default 10; from 1 to 1 000.
   */
  maxMutationsPerRequest?: number;
  /**
   * Runs `IdempotencyCompleter` in this process: it finds `@PhasedWorkflow()` runs of `atomicPhases`
   * routes that nobody finished (the process died, the client gave up) and drives them through their
   * last phase. Off by default; `{}` takes the defaults. See docs/guides/recovery-points.md.
   */
  completer?: CompleterOptions;
}

/** How `IdempotencyCompleter` looks for abandoned runs. */
export interface CompleterOptions {
  /** How often it looks, in ms; `0`: never by itself (call `completeAbandoned()`). Default 60 000. */
  intervalMs?: number;
  /** How long a run must have made no progress, and held no claim, to count as abandoned, in ms. Default 60 000. */
  idleMs?: number;
  /** The most runs it drives per look, one after the other. Default 10. */
  batch?: number;
}

/** `forRoot()` argument: the options plus how the module is registered. */
export interface IdempotencyModuleRootOptions extends IdempotencyModuleOptions {
  /** Register the module globally, so any module's controllers can use `@Idempotent()`. Default `true`. */
  isGlobal?: boolean;
}

/** A class that builds the options, for `forRootAsync({ useClass })`. */
export interface IdempotencyOptionsFactory {
  createIdempotencyOptions(): IdempotencyModuleOptions | Promise<IdempotencyModuleOptions>;
}

/** `forRootAsync()` argument: one of `useFactory`, `useClass` or `useExisting`. */
export interface IdempotencyModuleAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  /** Default `true`, as for `forRoot()`. */
  isGlobal?: boolean;
  /** Builds the options from the providers `inject` lists, in that order. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- as Nest's own factories: the arguments are whatever `inject` lists
  useFactory?: (...args: any[]) => IdempotencyModuleOptions | Promise<IdempotencyModuleOptions>;
  inject?: FactoryProvider['inject'];
  useClass?: Type<IdempotencyOptionsFactory>;
  useExisting?: Type<IdempotencyOptionsFactory>;
  /** Providers the factory or class needs that no imported module exports. */
  extraProviders?: Provider[];
}
