import { FAILURES } from '../../shared/messages/operator.messages.js';

/**
 * A connection (a pool, an open database) made on first use and shared by every caller. A failed
 * attempt is forgotten, so the next use tries again: a store whose server is down at startup
 * recovers without a restart.
 */
export class LazyConnection<T> {
  private pending: Promise<T> | undefined;
  private closed = false;

  constructor(private readonly make: () => Promise<T>) {}

  get(): Promise<T> {
    // Closed for good: a late caller (a release retried after shutdown) must not open a new pool
    // that nothing would ever close.
    if (this.closed) return Promise.reject(new Error(FAILURES.closed));
    this.pending ??= this.make().catch((err: unknown) => {
      this.pending = undefined;
      throw err;
    });
    return this.pending;
  }

  /** Closes for good and hands back what was made (or is being made), for the caller to close. */
  take(): Promise<T> | undefined {
    this.closed = true;
    const pending = this.pending;
    this.pending = undefined;
    return pending;
  }
}
