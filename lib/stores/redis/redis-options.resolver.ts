import { Logger } from '@nestjs/common';
import { MAX_TIMER_MS } from '../../shared/idempotency.constants.js';
import { CONFIG_ERRORS } from '../../shared/messages/config.messages.js';
import { LOGS } from '../../shared/messages/operator.messages.js';
import { fail, integerIn, refuseUnknownKeys } from '../../shared/options/option.validators.js';
import { RedisCacheOptions } from './redis-cache.options.js';
import { DEFAULT_REDIS_COMMAND_TIMEOUT_MS, type RedisClientLike, type RedisStoreOptions } from './redis-store.options.js';

const OPTION_KEYS = ['url', 'client', 'commandTimeoutMs', 'redisOptions'] as const;

let warnedBuilder = false;

/** {@link RedisStoreOptions}, checked, with their defaults: exactly one of `url` and `client`. */
export type ResolvedRedisOptions =
  | { url: string; client: undefined; commandTimeoutMs: number; redisOptions: Readonly<Record<string, unknown>> }
  | { url: undefined; client: RedisClientLike; commandTimeoutMs: number; redisOptions: Readonly<Record<string, unknown>> };

/** Checks a `RedisStore`'s options at construction; the deprecated builder is still taken, with one warning. */
export function resolveRedisOptions(given: RedisStoreOptions | RedisCacheOptions): ResolvedRedisOptions {
  const where = 'RedisStore';
  let options = given;
  if (given instanceof RedisCacheOptions) {
    if (!warnedBuilder) {
      warnedBuilder = true;
      new Logger('Idempotency').warn(LOGS.renamed('RedisCacheOptions', '{ url } or { client }'));
    }
    const { url, client, commandTimeoutMs, redisOptions } = given;
    options = { url, client, commandTimeoutMs, redisOptions };
  }
  if (options === null || typeof options !== 'object') fail(where, CONFIG_ERRORS.notAnObject);
  refuseUnknownKeys(where, options, OPTION_KEYS, undefined);
  const { url, client } = options as RedisStoreOptions;
  if ((url === undefined) === (client === undefined)) fail(where, CONFIG_ERRORS.redisTarget);
  if (url !== undefined && (typeof url !== 'string' || url === '')) fail(where, CONFIG_ERRORS.redisTarget);
  const commandTimeoutMs = integerIn(
    where,
    'commandTimeoutMs',
    (options as RedisStoreOptions).commandTimeoutMs,
    DEFAULT_REDIS_COMMAND_TIMEOUT_MS,
    1,
    MAX_TIMER_MS,
  );
  const redisOptions = (options as RedisStoreOptions).redisOptions ?? {};
  return url !== undefined
    ? { url, client: undefined, commandTimeoutMs, redisOptions }
    : { url: undefined, client: client!, commandTimeoutMs, redisOptions };
}
