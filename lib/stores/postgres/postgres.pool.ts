import type { Logger } from '@nestjs/common';
import { LOGS } from '../../shared/messages/operator.messages.js';
import { importRequired } from '../../shared/utils/optional-peer.util.js';
import type { PostgresPoolLike } from './postgres-store.options.js';

/** The pool a `PostgresStore` given a connection string creates, owns and closes. */
export async function createPostgresPool(
  connectionString: string | undefined,
  size: number,
  timeoutMs: number,
  logger: Logger,
): Promise<PostgresPoolLike> {
  const pg = await loadPg();
  const pool = new pg.Pool({
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

/** The parts of node-postgres the store uses: its pool, and a client of its own for LISTEN. */
interface PgModule {
  Pool: new (config: object) => PostgresPoolLike;
  Client: new (config: object) => unknown;
}

/** node-postgres, loaded here and only here, on first use: the in-memory and Redis paths must run without pg installed. */
export async function loadPg(): Promise<PgModule> {
  const pg = await importRequired('PostgresStore', 'pg', 8, () => import('pg'));
  return (pg as unknown as { default: PgModule }).default;
}
