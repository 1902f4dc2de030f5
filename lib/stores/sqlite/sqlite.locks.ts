import type { SqliteDatabaseLike } from './sqlite-store.options.js';

/**
 * How long SQLite itself waits for a lock, in ms. better-sqlite3 waits synchronously, stalling
 * every other request of the process; past this the store waits asynchronously and tries again.
 */
export const SYNC_BUSY_MS = 5;
/** The longest pause between two tries of a locked statement. */
const MAX_BUSY_PAUSE_MS = 50;

/**
 * Cuts the lock wait of a connection the application owns to `wait` ms for the store's own work
 * only, then gives the application its setting back: the sample's payment insert on the same
 * connection kept failing with SQLITE_BUSY once the store had lowered its 5 s wait for good. All of
 * it is synchronous, so no statement of the application runs in between.
 */
export function lentWait(db: SqliteDatabaseLike, wait: number): <T>(work: () => T) => T {
  const read = db.prepare('PRAGMA busy_timeout');
  return (work) => {
    const own = (read.get() as { timeout: number }).timeout;
    // Through pragma() each time, not a statement prepared once: SQLite applies this pragma while
    // compiling it, so running a prepared one again changes nothing.
    db.pragma(`busy_timeout = ${wait}`);
    try {
      return work();
    } finally {
      db.pragma(`busy_timeout = ${own}`);
    }
  };
}

/** Whether `err` is SQLite's answer that another connection holds the lock. */
export function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'));
}

/**
 * Runs `work` (one synchronous statement or transaction); while another connection holds the
 * lock, tries again after a pause that doubles, for `busyTimeoutMs` in all. The waiting is
 * asynchronous: one locked key never stalls the other requests of the process.
 */
export async function whileBusy<T>(work: () => T, busyTimeoutMs: number): Promise<T> {
  const deadline = Date.now() + busyTimeoutMs;
  for (let pause = 1; ; pause = Math.min(pause * 2, MAX_BUSY_PAUSE_MS)) {
    try {
      return work();
    } catch (err) {
      if (!isBusy(err) || Date.now() + pause > deadline) throw err;
    }
    await new Promise((r) => setTimeout(r, pause));
  }
}
