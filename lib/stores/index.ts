// The `nestjs-idempotency/store` entry: what a store of your own (or a transactions port) is written
// against — the fenced contract, its records, the optional capabilities, and the client shapes the
// built-in stores accept. An application that only uses the module needs none of it.

export type {
  IdempotencyStore,
  StoreCore,
  ClaimOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
  HeldEntry,
  PeekedEntry,
  OwnedKey,
  StoreNeeds,
} from './contract/idempotency-store.interface.js';
export type {
  AbandonedRuns,
  BatchRenewal,
  EvictionWatch,
  HealthCheck,
  Inspection,
  RecoveryPoints,
  SettleAnnouncements,
  StoreLifecycle,
  TransactionalCompletion,
} from './contract/store-capabilities.interface.js';
export type { StoredResponse } from '../shared/interfaces/stored-response.interface.js';
export type { AbandonedRun, PhaseAdvance, RecoveryPoint } from '../shared/interfaces/recovery-point.interface.js';
export type { IdempotencyInspectOptions, IdempotencyKeyTarget } from '../shared/interfaces/idempotency-key-info.interface.js';
export type {
  IdempotencyTransactions,
  SqlExecutor,
  TransactionHostLike,
  TransactionQuery,
} from '../shared/interfaces/idempotency-transactions.interface.js';
export type { SqlStoreOptions } from './shared/sql-store.options.js';
export type { CacheSetOptions } from './memory/in-memory-store.options.js';
export type { RedisClientLike } from './redis/redis-store.options.js';
export type { PostgresPoolLike } from './postgres/postgres-store.options.js';
export type { MySqlPoolLike } from './mysql/mysql-store.options.js';
export type { SqliteDatabaseLike, SqliteStatementLike } from './sqlite/sqlite-store.options.js';
