import { MAX_TIMER_MS } from '../../shared/idempotency.constants.js';
import { CONFIG_ERRORS } from '../../shared/messages/config.messages.js';
import { booleanOption, fail, integerIn, refuseUnknownKeys, sqlIdentifier } from '../../shared/options/option.validators.js';
import {
  DEFAULT_POOL_SIZE,
  DEFAULT_POSTGRES_SCHEMA,
  DEFAULT_STATEMENT_TIMEOUT_MS,
  type PostgresStoreOptions,
} from './postgres-store.options.js';
import type { PostgresNames } from './postgres.schema.js';
import { DEFAULT_SWEEP_INTERVAL_MS, DEFAULT_TABLE_NAME } from '../shared/sql-store.options.js';

const OPTION_KEYS = [
  'connectionString',
  'pool',
  'schema',
  'tableName',
  'createSchema',
  'sweepIntervalMs',
  'statementTimeoutMs',
  'poolSize',
  'preparedStatements',
] as const;

/** {@link PostgresStoreOptions}, checked, with their defaults. */
export interface ResolvedPostgresOptions {
  readonly names: PostgresNames;
  readonly statementTimeoutMs: number;
  readonly poolSize: number;
  readonly sweepIntervalMs: number;
  readonly preparedStatements: boolean;
}

/** Checks a `PostgresStore`'s options at construction: a mistake fails the start, not a request. */
export function resolvePostgresOptions(options: PostgresStoreOptions): ResolvedPostgresOptions {
  const where = 'PostgresStore';
  if (options === null || typeof options !== 'object') fail(where, CONFIG_ERRORS.notAnObject);
  refuseUnknownKeys(where, options, OPTION_KEYS, undefined);
  if ((options.connectionString === undefined) === (options.pool === undefined)) fail(where, CONFIG_ERRORS.postgresTarget);
  return {
    names: {
      schema: sqlIdentifier(where, 'schema', options.schema ?? DEFAULT_POSTGRES_SCHEMA),
      table: sqlIdentifier(where, 'tableName', options.tableName ?? DEFAULT_TABLE_NAME),
    },
    statementTimeoutMs: integerIn(
      where,
      'statementTimeoutMs',
      options.statementTimeoutMs,
      DEFAULT_STATEMENT_TIMEOUT_MS,
      1,
      MAX_TIMER_MS,
    ),
    poolSize: integerIn(where, 'poolSize', options.poolSize, DEFAULT_POOL_SIZE, 1, 1000),
    sweepIntervalMs: integerIn(where, 'sweepIntervalMs', options.sweepIntervalMs, DEFAULT_SWEEP_INTERVAL_MS, 0, MAX_TIMER_MS),
    preparedStatements: booleanOption(where, 'preparedStatements', options.preparedStatements, true),
  };
}
