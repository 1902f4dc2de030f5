/**
 * One duplicate waiting for a key in flight: woken by `DuplicateWaiters` when the key settles
 * anywhere, or by its own deadline. A wake-up that comes while the duplicate is looking at the store
 * is kept for its next wait, so none is lost between two looks.
 */
export class KeyWaiter {
  private woken = false;
  private wake: ((woken: boolean) => void) | undefined;

  constructor(
    readonly storeKey: string,
    /** When the wait ends (epoch ms): `waitMs` after the duplicate first found the key in flight. */
    readonly deadline: number,
  ) {}

  /** The key settled somewhere: look again. */
  notify(): void {
    if (this.wake) this.wake(true);
    else this.woken = true;
  }

  /**
   * Resolves `true` once notified (or notified since the last call) or at `lookAgainAt` (the owner's
   * lease may have lapsed: a dead owner announces nothing), `false` at the deadline.
   */
  next(lookAgainAt = Infinity): Promise<boolean> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const end = (woken: boolean): void => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve(woken);
      };
      // Past the deadline it fires at once. Not unref'd: a request that waits keeps its process, as
      // any request in flight does.
      const at = Math.min(this.deadline, lookAgainAt);
      const timer = setTimeout(end, at - Date.now(), at < this.deadline);
      this.wake = end;
    });
  }
}
