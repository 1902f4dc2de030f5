import type { Logger } from '@nestjs/common';
import { LOGS } from '../../shared/messages/operator.messages.js';
import { importRequired } from '../../shared/utils/optional-peer.util.js';
import { lockWaitSeconds, type MySqlPoolLike } from './mysql-store.options.js';

/** A connection of mysql2's callback API, as the pool's `connection` event hands it over. */
interface RawConnection {
  query(sql: string, callback: (err: Error | null) => void): void;
}

/** The part of `mysql2/promise` the store uses. */
interface MySql2Module {
  createPool(config: object): MySqlPoolLike & {
    on(event: 'connection', listener: (connection: RawConnection) => void): unknown;
  };
}

/**
 * The pool a `MySqlStore` given a URI creates, owns and closes. Each new connection is set up before
 * its first statement (mysql2 runs a connection's statements in order): READ COMMITTED, so the
 * store's statements take no gap locks (the sweep's range delete locks only the expired rows it
 * deletes, a claim's insert no gap beside its key); and a lock wait bounded by the statement timeout,
 * ended by the server, which undoes the statement. Keep-alive probes find a connection a firewall
 * dropped; one the server closed (`wait_timeout`) leaves the pool when its socket ends.
 */
export async function createMySqlPool(uri: string, size: number, timeoutMs: number, logger: Logger): Promise<MySqlPoolLike> {
  const mysql = await loadMySql2();
  const pool = mysql.createPool({
    uri,
    connectionLimit: size,
    maxIdle: size,
    idleTimeout: 30_000,
    connectTimeout: timeoutMs,
    enableKeepAlive: true,
    keepAliveInitialDelay: 10_000,
  });
  const lockWait = lockWaitSeconds(timeoutMs);
  const report = (err: Error | null) => err && logger.error(LOGS.mysqlSession(err.message));
  pool.on('connection', (connection) => {
    connection.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED', report);
    connection.query(`SET SESSION innodb_lock_wait_timeout = ${lockWait}`, report);
  });
  return pool;
}

/** mysql2, loaded here and only here, on first use: the other stores run without it installed. */
async function loadMySql2(): Promise<MySql2Module> {
  const mysql = await importRequired('MySqlStore', 'mysql2', 3, () => import('mysql2/promise'));
  return ((mysql as unknown as { default?: MySql2Module }).default ?? mysql) as unknown as MySql2Module;
}
