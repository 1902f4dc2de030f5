/**
 * A connection (a pool, an open database) made on first use and shared by every caller. A failed
 * attempt is forgotten, so the next use tries again: a store whose server is down at startup
 * recovers without a restart.
 */
export class LazyConnection<T> {
  private pending: Promise<T> | undefined;

  constructor(private readonly make: () => Promise<T>) {}

  get(): Promise<T> {
    this.pending ??= this.make().catch((err: unknown) => {
      this.pending = undefined;
      throw err;
    });
    return this.pending;
  }

  /** Forgets the connection and hands back what was made (or is being made), for the caller to close. */
  take(): Promise<T> | undefined {
    const pending = this.pending;
    this.pending = undefined;
    return pending;
  }
}
