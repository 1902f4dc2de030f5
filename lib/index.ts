// The root entry: what an application writes, and nothing else (at most 40 names; a test holds them
// to the README's "API" table). Store authors import from `nestjs-idempotency/store`, the names of
// 0.x from `nestjs-idempotency/compat`, a store's test suite from `nestjs-idempotency/testing`.

// The module, the decorators, the exception
export { IdempotencyModule } from './idempotency.module.js';
export { Idempotent } from './nest/decorators/idempotent.decorator.js';
export { IdempotencyKey } from './nest/decorators/idempotency-key.decorator.js';
export { IdempotencyException } from './shared/exceptions/idempotency.exception.js';
export { IDEMPOTENCY_CORS_HEADERS } from './shared/idempotency.constants.js';
export type {
  IdempotencyModuleAsyncOptions,
  IdempotencyModuleOptions,
  IdempotencyOptionsFactory,
} from './shared/interfaces/idempotency-module-options.interface.js';
export type { IdempotentOptions } from './shared/interfaces/idempotent-options.interface.js';
export type { IdempotencyErrorBody, IdempotencyErrorCode } from './shared/interfaces/idempotency-error.interface.js';
export type { IdempotencyEvent, IdempotencyEventListener } from './shared/interfaces/idempotency-event.interface.js';
export type { IdempotencyIdentityResolver } from './shared/interfaces/identity-resolver.interface.js';
export type { IdempotencyEncryption } from './shared/interfaces/idempotency-encryption.interface.js';

// The stores
export type { IdempotencyStore } from './stores/contract/idempotency-store.interface.js';
export { InMemoryStore } from './stores/memory/in-memory.store.js';
export type { InMemoryStoreOptions } from './stores/memory/in-memory-store.options.js';
export { RedisStore } from './stores/redis/redis.store.js';
export type { RedisStoreOptions } from './stores/redis/redis-store.options.js';
export { PostgresStore } from './stores/postgres/postgres.store.js';
export type { PostgresStoreOptions } from './stores/postgres/postgres-store.options.js';
export { SqliteStore } from './stores/sqlite/sqlite.store.js';
export type { SqliteStoreOptions } from './stores/sqlite/sqlite-store.options.js';
export { MySqlStore } from './stores/mysql/mysql.store.js';
export type { MySqlStoreOptions } from './stores/mysql/mysql-store.options.js';

// Surfaces other than routes
export { IdempotencyInbox } from './transports/inbox/idempotency.inbox.js';
export type { InboxResult, InboxRunOptions } from './shared/interfaces/inbox-options.interface.js';
export { idempotencyApolloPlugin } from './transports/graphql/replay-marks.js';

// Exactly-once with the application's own transaction; recovery points
export { clsTransactions } from './core/transactions/cls.transactions.js';
export type { IdempotencyTransactions } from './shared/interfaces/idempotency-transactions.interface.js';
export { Phases } from './nest/decorators/phases.decorator.js';
export { PhasedWorkflow } from './nest/decorators/phased-workflow.decorator.js';
export { PhasedRun } from './core/phases/phased.run.js';
export { IdempotencyCompleter } from './core/idempotency.completer.js';

// Operations
export { IdempotencyAdmin } from './ops/admin/idempotency.admin.js';
export type { IdempotencyKeyInfo } from './shared/interfaces/idempotency-key-info.interface.js';
export { IdempotencyHealthIndicator } from './ops/health/idempotency.health-indicator.js';
export type { IdempotencyHealthOptions } from './ops/health/idempotency.health-indicator.js';
