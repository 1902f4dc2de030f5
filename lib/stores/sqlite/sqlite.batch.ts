import { isBusy, whileBusy } from './sqlite.locks.js';
import type { SqliteDatabaseLike } from './sqlite-store.options.js';

/** One piece of the store's work waiting for the next batch, and whom to tell how it went. */
interface Queued {
  work: () => unknown;
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
}

/** What one piece of work came to inside the batch's transaction. */
type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * Runs the store's statements of one turn of the event loop in one write transaction (a group
 * commit). Each transaction in WAL mode pays its locks, its commit and a log frame for every page it
 * changes; under load many claims and commits arrive per turn, and they share the table's and the
 * `expires_at` index's last pages, so one transaction writes far fewer frames than one each. Nothing
 * is answered before the transaction holding it has committed, so a claim another process can see is
 * still never reported before it is durable to the same degree as before.
 */
export class SqliteBatch {
  private queue: Queued[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private readonly transaction: { immediate(queued: readonly Queued[]): Outcome[] };

  /**
   * @param briefly runs the whole batch with SQLite's own lock wait cut short (see `lentWait`).
   * @param busyTimeoutMs how long a batch waits for another connection's write lock, in all.
   */
  constructor(
    private readonly db: SqliteDatabaseLike,
    private readonly briefly: <T>(work: () => T) => T,
    private readonly busyTimeoutMs: number,
  ) {
    // IMMEDIATE: the write lock is taken at the start, so two processes never deadlock upgrading a read.
    this.transaction = db.transaction((queued: readonly Queued[]) => queued.map((q) => this.attempt(q)));
  }

  /** Runs `work` (synchronous statements) in the next batch; settles once that batch has committed. */
  run<T>(work: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const first = this.queue.push({ work, resolve: resolve as (value: unknown) => void, reject }) === 1;
      // The next check phase: every request this turn's I/O callbacks started is queued by then.
      if (first) {
        setImmediate(() => {
          this.flushing = this.flush();
        });
      }
    });
  }

  /** Resolves once the work queued so far has been run; the store waits for it before it closes. */
  async drained(): Promise<void> {
    while (this.queue.length > 0) await new Promise((r) => setImmediate(r));
    await this.flushing;
  }

  private async flush(): Promise<void> {
    const queued = this.queue;
    this.queue = [];
    let outcomes: Outcome[];
    try {
      outcomes = await whileBusy(() => this.briefly(() => this.transaction.immediate(queued)), this.busyTimeoutMs);
    } catch (err) {
      // Rolled back, or never begun: none of it happened.
      for (const q of queued) q.reject(err);
      return;
    }
    outcomes.forEach((o, i) => (o.ok ? queued[i].resolve(o.value) : queued[i].reject(o.error)));
  }

  /**
   * One piece of work inside the transaction. Its own error is its own: SQLite undid that statement
   * and the transaction goes on. A lock error, or one after which SQLite rolled the whole transaction
   * back, ends the batch (waited out and tried again, or reported to all of it).
   */
  private attempt(q: Queued): Outcome {
    try {
      return { ok: true, value: q.work() };
    } catch (error) {
      if (isBusy(error) || !this.db.inTransaction) throw error;
      return { ok: false, error };
    }
  }
}
