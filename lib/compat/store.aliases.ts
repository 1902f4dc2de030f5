import { Logger } from '@nestjs/common';
import { LOGS } from '../shared/messages/operator.messages.js';
import { InMemoryStore } from '../stores/memory/in-memory.store.js';
import type { InMemoryStoreOptions } from '../stores/memory/in-memory-store.options.js';
import { RedisStore } from '../stores/redis/redis.store.js';

const warned = new Set<string>();

/**
 * The store class itself under its old name: `new`, `instanceof`, `extends` and static members all
 * reach the same class; the first `new` through the old name logs one warning per process.
 */
function renamed<T extends abstract new (...args: never[]) => object>(store: T, old: string): T {
  return new Proxy(store, {
    construct(target, args, newTarget) {
      if (!warned.has(old)) {
        warned.add(old);
        new Logger('Idempotency').warn(LOGS.renamed(old, target.name));
      }
      return Reflect.construct(target, args, newTarget) as object;
    },
  });
}

/** @deprecated Renamed {@link InMemoryStore}: the same class. */
export const InMemoryCache = renamed(InMemoryStore, 'InMemoryCache');
/** @deprecated Renamed {@link InMemoryStore}: the same class. */
export type InMemoryCache = InMemoryStore;
/** @deprecated Renamed {@link InMemoryStoreOptions}. */
export type InMemoryCacheOptions = InMemoryStoreOptions;

/** @deprecated Renamed {@link RedisStore}: the same class. */
export const RedisCache = renamed(RedisStore, 'RedisCache');
/** @deprecated Renamed {@link RedisStore}: the same class. */
export type RedisCache = RedisStore;
