import { MAX_TIMER_MS } from '../../shared/idempotency.constants.js';
import { CONFIG_ERRORS } from '../../shared/messages/config.messages.js';
import { fail, integerIn, refuseUnknownKeys, sqlIdentifier } from '../../shared/options/option.validators.js';
import { DEFAULT_SWEEP_INTERVAL_MS, DEFAULT_TABLE_NAME } from '../shared/sql-store.options.js';
import { DEFAULT_MYSQL_POOL_SIZE, DEFAULT_MYSQL_TIMEOUT_MS, type MySqlStoreOptions } from './mysql-store.options.js';

const OPTION_KEYS = ['uri', 'pool', 'tableName', 'createSchema', 'sweepIntervalMs', 'statementTimeoutMs', 'poolSize'] as const;

/** MySQL's longest identifier is 64 characters; the procedure's name adds `_claim` to the table's. */
const MAX_TABLE_NAME = 58;

/** {@link MySqlStoreOptions}, checked, with their defaults. */
export interface ResolvedMySqlOptions {
  readonly table: string;
  readonly statementTimeoutMs: number;
  readonly poolSize: number;
  readonly sweepIntervalMs: number;
}

/** Checks a `MySqlStore`'s options at construction: a mistake fails the start, not a request. */
export function resolveMySqlOptions(options: MySqlStoreOptions): ResolvedMySqlOptions {
  const where = 'MySqlStore';
  if (options === null || typeof options !== 'object') fail(where, CONFIG_ERRORS.notAnObject);
  refuseUnknownKeys(where, options, OPTION_KEYS, undefined);
  if ((options.uri === undefined) === (options.pool === undefined)) fail(where, CONFIG_ERRORS.mysqlTarget);
  const table = sqlIdentifier(where, 'tableName', options.tableName ?? DEFAULT_TABLE_NAME);
  if (table.length > MAX_TABLE_NAME) fail(where, CONFIG_ERRORS.tableNameLength(MAX_TABLE_NAME, table.length));
  return {
    table,
    statementTimeoutMs: integerIn(
      where,
      'statementTimeoutMs',
      options.statementTimeoutMs,
      DEFAULT_MYSQL_TIMEOUT_MS,
      1,
      MAX_TIMER_MS,
    ),
    poolSize: integerIn(where, 'poolSize', options.poolSize, DEFAULT_MYSQL_POOL_SIZE, 1, 1000),
    sweepIntervalMs: integerIn(where, 'sweepIntervalMs', options.sweepIntervalMs, DEFAULT_SWEEP_INTERVAL_MS, 0, MAX_TIMER_MS),
  };
}
