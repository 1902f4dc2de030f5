// The package's only entry point: what the README documents (its "API" section), nothing else;
// a test holds the two to each other. Tests reach internals by path.

// Module and request path
export { IdempotencyModule } from './idempotency.module.js';
export { Idempotent } from './nest/decorators/idempotent.decorator.js';
export { IdempotencyKey } from './nest/decorators/idempotency-key.decorator.js';
export { IdempotencyException } from './shared/exceptions/idempotency.exception.js';
export { IdempotencyAdmin } from './ops/admin/idempotency.admin.js';
export { IdempotencyInbox } from './transports/inbox/idempotency.inbox.js';
export { idempotencyApolloPlugin } from './transports/graphql/replay-marks.js';
export type { InboxResult, InboxRunOptions } from './shared/interfaces/inbox-options.interface.js';
export { IdempotencyHealthIndicator } from './ops/health/idempotency.health-indicator.js';
export type { IdempotencyHealthOptions, IdempotencyHealthResult } from './ops/health/idempotency.health-indicator.js';

// Options
export type {
  IdempotencyModuleAsyncOptions,
  IdempotencyModuleOptions,
  IdempotencyModuleRootOptions,
  IdempotencyOptionsFactory,
} from './shared/interfaces/idempotency-module-options.interface.js';
export type { ResolvedIdempotencyOptions } from './shared/interfaces/resolved-options.interface.js';
export type {
  ErrorFormat,
  FingerprintFunction,
  FingerprintMode,
  IdempotentOptions,
  MessageKeyFunction,
  MessageScopeFunction,
  InFlightPolicy,
  MissingHeaderPolicy,
  ReplayFlag,
} from './shared/interfaces/idempotent-options.interface.js';
export type {
  IdempotencyErrorBody,
  IdempotencyErrorCode,
  IdempotencyErrorInfo,
} from './shared/interfaces/idempotency-error.interface.js';
export type { IdempotencyEncryption } from './shared/interfaces/idempotency-encryption.interface.js';
export type {
  IdempotencyEvent,
  IdempotencyEventListener,
  IdempotencyEventsOption,
  IdempotencyOutcome,
} from './shared/interfaces/idempotency-event.interface.js';
export type {
  IdempotencyInspectOptions,
  IdempotencyKeyInfo,
  IdempotencyKeyTarget,
} from './shared/interfaces/idempotency-key-info.interface.js';
export type {
  IdempotencyIdentity,
  IdempotencyIdentityResolver,
  IdentityFunction,
} from './shared/interfaces/identity-resolver.interface.js';
export { IDEMPOTENCY_CORS_HEADERS, IDEMPOTENCY_MODULE_OPTIONS } from './shared/idempotency.constants.js';

// Store contract and records, for store authors
export type {
  ClaimOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
  IdempotencyStore,
  HeldEntry,
  PeekedEntry,
  OwnedKey,
  StoreNeeds,
} from './stores/contract/idempotency-store.interface.js';
export type { StoredResponse } from './shared/interfaces/stored-response.interface.js';
export type { IdempotencyTransactions, SqlExecutor } from './shared/interfaces/idempotency-transactions.interface.js';

// Stores
export { InMemoryStore } from './stores/memory/in-memory.store.js';
export type { InMemoryStoreOptions, CacheSetOptions } from './stores/memory/in-memory-store.options.js';
export { RedisStore } from './stores/redis/redis.store.js';
export type { RedisClientLike, RedisStoreOptions } from './stores/redis/redis-store.options.js';
export { PostgresStore } from './stores/postgres/postgres.store.js';
export type { PostgresStoreOptions, PostgresPoolLike } from './stores/postgres/postgres-store.options.js';
export { SqliteStore } from './stores/sqlite/sqlite.store.js';
export type { SqliteStoreOptions, SqliteDatabaseLike, SqliteStatementLike } from './stores/sqlite/sqlite-store.options.js';
export type { SqlStoreOptions } from './stores/shared/sql-store.options.js';

// Exactly-once with the application's own transaction
export { clsTransactions } from './core/transactions/cls.transactions.js';
export type { TransactionHostLike, TransactionQuery } from './core/transactions/cls.transactions.js';

// Recovery points: handlers in atomic phases
export { Phases } from './nest/decorators/phases.decorator.js';
export { PhasedWorkflow } from './nest/decorators/phased-workflow.decorator.js';
export { PhasedRun } from './core/phases/phased.run.js';
export { IdempotencyCompleter } from './core/idempotency.completer.js';
export type { CompleterOptions } from './shared/interfaces/idempotency-module-options.interface.js';
export type { AbandonedRun, PhaseAdvance, RecoveryPoint } from './shared/interfaces/recovery-point.interface.js';

// The names of 0.x, kept working with one warning each until 1.0 (see CHANGELOG.md)
export { InMemoryCache, RedisCache } from './stores/deprecated.aliases.js';
export type { InMemoryCacheOptions } from './stores/deprecated.aliases.js';
export { RedisCacheOptions } from './stores/redis/redis-cache.options.js';
