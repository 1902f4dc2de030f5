import type { Logger } from '@nestjs/common';
import { LOGS } from '../idempotency.messages.js';
import type { PostgresPoolLike } from './postgres-store.options.js';

/** The pool a `PostgresStore` given a connection string creates, owns and closes. */
export async function createPostgresPool(
  connectionString: string | undefined,
  size: number,
  timeoutMs: number,
  logger: Logger,
): Promise<PostgresPoolLike> {
  // Loaded here, not at import: the in-memory and Redis paths must run without pg installed.
  const pg = (await import('pg')) as unknown as { default: { Pool: new (config: object) => PostgresPoolLike } };
  const pool = new pg.default.Pool({
    connectionString,
    max: size,
    statement_timeout: timeoutMs,
    connectionTimeoutMillis: timeoutMs,
    idleTimeoutMillis: 30_000,
  });
  // An idle connection whose backend dies emits 'error' on the pool: unheard, it would end the process.
  pool.on('error', (err: Error) => logger.error(LOGS.postgresIdleError(err.message)));
  return pool;
}
