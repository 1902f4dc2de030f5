import { FAILURES } from '../../shared/messages/operator.messages.js';

/**
 * Which lane a statement waits in. `RENEWAL` is the urgent lane's front: the one statement that
 * keeps every running handler's lease goes before the commits queued behind it, which would
 * otherwise let those leases lapse on a slow or busy pool.
 */
export const RENEWAL = 2;
export const URGENT = 0;
export const NORMAL = 1;
export type Lane = typeof RENEWAL | typeof URGENT | typeof NORMAL;

interface Waiter {
  readonly lane: Lane;
  start(): void;
  timer?: NodeJS.Timeout;
}

/**
 * Admission to a connection pool in two lanes. Work that keeps a running handler's promise (the
 * commit of a finished handler, the renewal of held claims, a release) is urgent: it goes ahead of
 * every waiting claim, and one connection is kept from claims (when the pool has more than one), so
 * a burst of duplicates can never starve a commit or let a lease lapse. Without this, a pool's own
 * FIFO queue put each renewal behind every claim that arrived before it.
 *
 * At most `size` statements are handed to the pool at once, so the pool's own queue stays empty and
 * the order is decided here. A waiter of the normal lane gives up after `waitMs` (the claim answers
 * 503, as a pool's connection timeout would have); urgent ones wait their turn.
 */
export class PoolLanes {
  private running = 0;
  private runningNormal = 0;
  private readonly urgent: Waiter[] = [];
  private readonly normal: Waiter[] = [];
  private readonly normalLimit: number;

  constructor(
    private readonly size: number,
    private readonly waitMs: number,
    /** The database, as the 503's reason names it. */
    private readonly database = 'PostgreSQL',
  ) {
    this.normalLimit = Math.max(1, size - 1);
  }

  run<T>(lane: Lane, work: () => Promise<T>): Promise<T> {
    if (this.admits(lane)) return this.started(lane, work);
    return new Promise<T>((resolve, reject) => {
      const waiter: Waiter = {
        lane,
        start: () => {
          clearTimeout(waiter.timer);
          this.started(lane, work).then(resolve, reject);
        },
      };
      if (lane === RENEWAL) {
        this.urgent.unshift(waiter);
        return;
      }
      if (lane === URGENT) {
        this.urgent.push(waiter);
        return;
      }
      waiter.timer = setTimeout(() => {
        const at = this.normal.indexOf(waiter);
        if (at >= 0) this.normal.splice(at, 1);
        reject(new Error(FAILURES.poolBusy(this.waitMs, this.database)));
      }, this.waitMs);
      waiter.timer.unref();
      this.normal.push(waiter);
    });
  }

  private admits(lane: Lane): boolean {
    if (this.running >= this.size) return false;
    if (lane !== NORMAL) return true;
    return this.urgent.length === 0 && this.runningNormal < this.normalLimit;
  }

  private async started<T>(lane: Lane, work: () => Promise<T>): Promise<T> {
    this.running++;
    if (lane === NORMAL) this.runningNormal++;
    try {
      return await work();
    } finally {
      this.running--;
      if (lane === NORMAL) this.runningNormal--;
      this.next();
    }
  }

  private next(): void {
    while (this.running < this.size) {
      if (this.urgent.length > 0) {
        this.urgent.shift()!.start();
      } else if (this.normal.length > 0 && this.runningNormal < this.normalLimit) {
        this.normal.shift()!.start();
      } else {
        return;
      }
    }
  }
}
