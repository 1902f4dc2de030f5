export { IdempotencyModule } from './idempotency.module.js';
export { Idempotent } from './idempotent.decorator.js';
export { IdempotencyKey } from './idempotency-key.decorator.js';
export { IdempotencyInterceptor } from './idempotency.interceptor.js';
export { IdempotencyExceptionFilter } from './idempotency.filter.js';
export { IdempotencyException } from './idempotency.exception.js';
export { IdempotencyService } from './idempotency.service.js';
export type { ActiveClaim } from './idempotency.service.js';
export { InMemoryCache } from './cache/in-memory.cache.js';
export type { InMemoryCacheOptions, CacheSetOptions } from './cache/in-memory.cache.js';
export type {
  ClaimOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
  IdempotencyStore,
  StoredResponse,
} from './cache/idempotency-store.interface.js';
export type {
  IdempotencyModuleAsyncOptions,
  IdempotencyModuleOptions,
  IdempotencyModuleRootOptions,
  IdempotencyOptionsFactory,
} from './interfaces/idempotency-module-options.interface.js';
export type { IdempotentOptions, MissingHeaderPolicy } from './interfaces/idempotent-options.interface.js';
export type {
  IdempotencyIdentity,
  IdempotencyIdentityResolver,
  IdentityFunction,
} from './interfaces/identity-resolver.interface.js';
export {
  IDEMPOTENCY_MODULE_OPTIONS,
  REPLAYED_HEADER,
  DEFAULT_HEADER_NAME,
  DEFAULT_KEY_PREFIX,
  DEFAULT_LEASE_MS,
  DEFAULT_MAX_KEY_LENGTH,
  DEFAULT_MAX_SCOPE_LENGTH,
  DEFAULT_TTL_MS,
} from './idempotency.constants.js';
export { RedisCache } from './cache/redis.cache.js';
export { RedisCacheOptions, DEFAULT_REDIS_COMMAND_TIMEOUT_MS } from './cache/redis-cache.options.js';
export type { RedisClientLike } from './cache/redis-cache.options.js';
