import type { Logger } from '@nestjs/common';
import { LOGS } from '../../shared/messages/operator.messages.js';
import type { PostgresStoreOptions } from './postgres-store.options.js';
import { loadPg } from './postgres.pool.js';

/** The channel every `PostgresStore` notifies settled keys on; a key carries its `keyPrefix`, so apps sharing a database tell theirs apart. */
export const SETTLED_CHANNEL = 'nestjs_idempotency_settled';

/** First pause before a lost LISTEN connection is opened again; it doubles up to {@link MAX_RECONNECT_MS}. */
const RECONNECT_MS = 500;
const MAX_RECONNECT_MS = 10_000;

/** The parts of a node-postgres `Client` the listener uses. */
interface ListenClient {
  connect(): Promise<void>;
  query(text: string): Promise<unknown>;
  end(): Promise<void>;
  on(event: 'notification', listener: (message: { channel: string; payload?: string }) => void): unknown;
  on(event: 'error' | 'end', listener: () => void): unknown;
}

/**
 * Wake-ups of waiting duplicates across processes on `LISTEN`/`NOTIFY`: one connection per store,
 * outside its pool (a waiter never holds a pool connection), opened when a duplicate first waits and
 * opened again when it is lost; then every waiter looks again, since what was notified while it was
 * away was not heard.
 */
export class PostgresWakeups {
  private client: ListenClient | undefined;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;

  constructor(
    private readonly options: PostgresStoreOptions,
    private readonly logger: Logger,
  ) {}

  async listen(listener: (key: string) => void, resumed?: () => void): Promise<void> {
    const { Client } = await loadPg();
    // Connected as the store's own pool, or as the application's (node-postgres keeps its config).
    const { pool, connectionString } = this.options;
    const config = pool ? (pool as { options?: object }).options : { connectionString };
    const client = new Client({ ...config, keepAlive: true }) as ListenClient;
    // Listening on one channel only: every notification is a settled key.
    client.on('notification', ({ payload }) => listener(String(payload)));
    // An 'error' is followed by 'end', where the connection is opened again.
    client.on('error', () => undefined);
    client.on('end', () => {
      if (this.client !== client || this.closed) return;
      this.client = undefined;
      this.reconnect(listener, resumed, RECONNECT_MS);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${SETTLED_CHANNEL}`);
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
    if (this.closed) return void client.end().catch(() => undefined);
    this.client = client;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private reconnect(listener: (key: string) => void, resumed: (() => void) | undefined, pause: number): void {
    this.retry = setTimeout(() => {
      this.listen(listener, resumed).then(
        () => {
          if (this.client) resumed?.();
        },
        (err: Error) => {
          this.logger.warn(LOGS.listenFailed(err.message));
          if (!this.closed) this.reconnect(listener, resumed, Math.min(pause * 2, MAX_RECONNECT_MS));
        },
      );
    }, pause);
    this.retry.unref();
  }
}
