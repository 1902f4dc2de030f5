import type { IdempotencyErrorBody } from './idempotency-error.interface.js';
import type { ResolvedEncryption } from './idempotency-encryption.interface.js';
import type { IdempotencyEventsOption } from './idempotency-event.interface.js';
import type { CompleterOptions } from './idempotency-module-options.interface.js';
import type { IdempotencyStore } from '../../stores/contract/idempotency-store.interface.js';
import type { IdempotencyTransactions } from './idempotency-transactions.interface.js';
import type {
  ErrorFormat,
  FingerprintMode,
  InFlightPolicy,
  MessageKeyFunction,
  MessageScopeFunction,
  MissingHeaderPolicy,
  ReplayFlag,
} from './idempotent-options.interface.js';
import type { IdempotencyIdentity } from './identity-resolver.interface.js';

/**
 * Module options with every default filled in; built once at startup. This is what the
 * `IDEMPOTENCY_MODULE_OPTIONS` token provides.
 */
export interface ResolvedIdempotencyOptions {
  /** The store in use: the `store` option, or the module's own `InMemoryStore`. */
  readonly store: IdempotencyStore;
  readonly ttlMs: number;
  readonly leaseMs: number;
  readonly maxHoldMs: number;
  readonly maxResponseBytes: number;
  /** Lower case, as Node hands header names over. */
  readonly headerName: string;
  readonly keyPrefix: string;
  readonly maxKeyLength: number;
  readonly maxScopeLength: number;
  readonly missingHeader: MissingHeaderPolicy;
  readonly fingerprint: FingerprintMode;
  readonly errorFormat: ErrorFormat;
  readonly problemTypeBaseUrl: string;
  readonly errorBody: IdempotencyErrorBody | undefined;
  readonly echoKeyHeader: boolean;
  readonly openApi: boolean;
  readonly events: IdempotencyEventsOption | undefined;
  readonly encryption: ResolvedEncryption | undefined;
  readonly openTelemetry: boolean;
  readonly replayFlag: ReplayFlag;
  /** Lower case; `false` when replays carry no header (`replayFlag: 'body'` or `replayedHeader: false`). */
  readonly replayedHeader: string | false;
  readonly identity: IdempotencyIdentity | undefined;
  readonly transactions: IdempotencyTransactions | undefined;
  readonly transactionTimeoutMs: number;
  readonly inFlight: InFlightPolicy;
  readonly waitMs: number;
  readonly maxWaiters: number;
  readonly maxMutationsPerRequest: number;
  /** `IdempotencyCompleter`'s: `intervalMs` is `0` unless the `completer` option is given. */
  readonly completer: Readonly<Required<CompleterOptions>>;
}

/** How a route's runs settle (`ResolvedRouteOptions.settling`). */
export type RouteSettling = 'commit' | 'transaction' | 'phases';

/** The options one route runs with: the module's, overridden by its `@Idempotent()` options. */
export interface ResolvedRouteOptions {
  /** `Controller.method`: part of the fingerprint (a key sent to another handler is a 422) and of log lines. */
  readonly id: string;
  readonly ttlMs: number;
  readonly missingHeader: MissingHeaderPolicy;
  readonly fingerprint: FingerprintMode;
  /** The tag this route's fingerprints are stored under (`''` for canonical ones). */
  readonly fingerprintTag: string;
  readonly identity: IdempotencyIdentity | undefined;
  /**
   * How a run settles, from the route's two exclusive options: `'commit'` (the record stored after the
   * run), `'transaction'` (`transactional: true`: the handler in the `transactions` port's transaction,
   * its record committed inside it), `'phases'` (`atomicPhases: true`: each phase committed with the
   * key's recovery point, `@Phases()`).
   */
  readonly settling: RouteSettling;
  /** How long a duplicate of a request in flight waits for it to settle, in ms; `0`: 409 at once (`inFlight: 'conflict'`). */
  readonly waitMs: number;
  /** The claim's lease: `leaseMs` (renewed), or `transactionTimeoutMs` (fixed) on a transactional route. */
  readonly leaseMs: number;
  /**
   * The controller routes by host (`@Controller({ host })`): the request's host is part of the key's
   * scope, so each host (tenant) has records of its own.
   */
  readonly hostScoped?: boolean;
  /** The handler takes `@IdempotencyKey()`: only then is the key left beside the request for it. */
  readonly readsKey?: boolean;
  /** A message handler's: how its key is read (`missingHeader` is then its `missingKey`). */
  readonly message?: {
    readonly keyFrom: MessageKeyFunction | undefined;
    readonly scope: MessageScopeFunction | undefined;
    readonly ack: boolean | 'skipped';
    readonly maxAttempts: number;
    /** An `@EventPattern()` handler: Nest sends no reply, so no value is stored for it. */
    readonly event: boolean;
    /**
     * How long a duplicate in flight waits on a transport that may hand one request to every replica
     * (Redis, NATS without a queue group): as long as a claim may be held, `maxHoldMs` plus a lease.
     */
    readonly broadcastWaitMs: number;
  };
  /** A GraphQL mutation's: how its key is read when not from the key header. */
  readonly graphql?: { readonly keyFrom: MessageKeyFunction | undefined };
}
