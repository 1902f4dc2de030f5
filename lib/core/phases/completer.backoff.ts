/** How many abandoned runs' failures a process remembers; the oldest is forgotten first. */
const TRACKED_RUNS = 10_000;
/** The longest pause between two tries of one run. */
const MAX_PAUSE_MS = 3_600_000;
/** The shortest first pause, whatever `idleMs` is: a run that fails at once is not tried again at once. */
const MIN_PAUSE_MS = 1_000;

/**
 * The completer's tries of runs that keep failing (a provider down, a bug in a phase), in this
 * process: the pause after each failure doubles from `idleMs` (at least a second) up to an hour, and
 * after `maxAttempts` failures the run is left for good, for its client's retry or an operator.
 */
export class CompleterBackoff {
  private readonly failures = new Map<string, { count: number; notBefore: number }>();

  constructor(
    private readonly idleMs: number,
    readonly maxAttempts: number,
  ) {}

  /** Whether the run of `key` may be tried now. */
  due(key: string, now = Date.now()): boolean {
    const failed = this.failures.get(key);
    return !failed || (failed.count < this.maxAttempts && now >= failed.notBefore);
  }

  /** One more failure of the run of `key`; `true` when it was the last try this process makes. */
  failed(key: string, now = Date.now()): boolean {
    const count = (this.failures.get(key)?.count ?? 0) + 1;
    const pause = Math.min(Math.max(this.idleMs, MIN_PAUSE_MS) * 2 ** (count - 1), MAX_PAUSE_MS);
    this.failures.delete(key);
    this.failures.set(key, { count, notBefore: now + pause });
    if (this.failures.size > TRACKED_RUNS) this.failures.delete(this.failures.keys().next().value!);
    return count >= this.maxAttempts;
  }

  /** The run of `key` is over: finished, or ended by its error. */
  ended(key: string): void {
    this.failures.delete(key);
  }
}
