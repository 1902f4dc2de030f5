import { type BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../../shared/idempotency.constants.js';
import { LOGS } from '../../shared/messages/operator.messages.js';
import type { ClaimOutcome } from '../../stores/contract/idempotency-store.interface.js';
import type { ResolvedIdempotencyOptions } from '../../shared/interfaces/resolved-options.interface.js';
import { calledOrAt } from '../../shared/utils/timeout.util.js';
import { KeyWaiter } from './key.waiter.js';

/** How long past the last waiter's deadline a graceful shutdown waits for its final look at the store. */
const ANSWER_GRACE_MS = 1000;

/**
 * The duplicates of this process that wait for a key in flight (`inFlight: 'wait'`), and how they are
 * woken: at once by a settle in this process, and through the store's `announce`
 * for a settle in another. Nothing here runs, and the store is not asked to listen, until a duplicate
 * first waits: routes without `inFlight: 'wait'` pay nothing.
 */
@Injectable()
export class DuplicateWaiters implements BeforeApplicationShutdown {
  private readonly logger = new Logger('Idempotency');
  private readonly waiting = new Map<string, Set<KeyWaiter>>();
  private readonly looks = new Map<string, Promise<ClaimOutcome>>();
  private count = 0;
  private listening: Promise<void> | undefined;
  private listenFailed = false;
  /** Set on a graceful shutdown: a woken duplicate that wins the key must not start its handler now. */
  closing = false;
  /** Set while a graceful shutdown waits for the last duplicate to be answered. */
  private answered: (() => void) | undefined;

  constructor(@Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions) {}

  /** How many duplicates wait now (for tests and health). */
  get size(): number {
    return this.count;
  }

  /**
   * A waiter for `storeKey`, registered before it resolves, and once this process hears the store's
   * announcements (or its wait ran out trying): a settle after that is never missed. `undefined` when
   * `maxWaiters` duplicates wait already. Pair with {@link leave}.
   */
  async enter(storeKey: string, waitMs: number): Promise<KeyWaiter | undefined> {
    if (this.count >= this.options.maxWaiters) return undefined;
    const waiter = new KeyWaiter(storeKey, Date.now() + waitMs);
    let waiters = this.waiting.get(storeKey);
    if (!waiters) this.waiting.set(storeKey, (waiters = new Set()));
    waiters.add(waiter);
    this.count++;
    await this.listen(waiter.deadline);
    return waiter;
  }

  leave(waiter: KeyWaiter): void {
    const waiters = this.waiting.get(waiter.storeKey);
    if (!waiters?.delete(waiter)) return;
    this.count--;
    if (waiters.size === 0) this.waiting.delete(waiter.storeKey);
    if (this.count === 0) this.answered?.();
  }

  /**
   * The `onSettled` of a waiting route's claims, called once its commit or release is done: wakes the
   * duplicates of this process at once, and those of others through the store.
   */
  readonly settled = (storeKey: string): void => {
    this.wake(storeKey);
    this.options.store.announce?.(storeKey).catch((err: Error) => this.logger.warn(LOGS.announceFailed(err.message)));
  };

  /**
   * Runs `look` (a claim of `storeKey`), unless a look at that key is under way in this process: then
   * its outcome is shared, so that a thousand waiters woken together cost one round trip, not a
   * thousand. A claim that look won belongs to its waiter alone: the others get `undefined` (the key is
   * in flight again, theirs to wait for), as they do when it failed. A settle of the key ends the
   * sharing of the look under way: that look may have been decided before the settle (a store that
   * decides at once and answers a turn later), and a waiter the settle woke must see what came after.
   */
  async look(storeKey: string, look: () => Promise<ClaimOutcome>): Promise<ClaimOutcome | undefined> {
    const pending = this.looks.get(storeKey);
    if (pending) {
      const shared = await pending.catch(() => undefined);
      return shared?.state === 'claimed' ? undefined : shared;
    }
    const mine = look();
    this.looks.set(storeKey, mine);
    try {
      return await mine;
    } finally {
      if (this.looks.get(storeKey) === mine) this.looks.delete(storeKey);
    }
  }

  /**
   * On a graceful shutdown a woken duplicate that wins the key gives it back ({@link closing}), and
   * the shutdown waits until every waiting duplicate has its answer written (at the latest a second
   * past the last one's deadline): the HTTP server, closed next, leaves a connection with a request
   * in flight open until its keep-alive timeout.
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.closing = true;
    if (this.count === 0) return;
    let latest = 0;
    for (const waiters of this.waiting.values()) for (const waiter of waiters) latest = Math.max(latest, waiter.deadline);
    await calledOrAt(latest + ANSWER_GRACE_MS, (done) => {
      this.answered = done;
    });
    this.answered = undefined;
    // The last one left its wait; its answer is written by the promise jobs after that.
    await new Promise((resolve) => setImmediate(resolve));
  }

  private readonly wake = (storeKey: string): void => {
    this.looks.delete(storeKey);
    const waiters = this.waiting.get(storeKey);
    if (waiters) for (const waiter of waiters) waiter.notify();
  };

  /** The store's listening connection is back: announcements made while it was away are lost. */
  private readonly wakeAll = (): void => {
    for (const storeKey of [...this.waiting.keys()]) this.wake(storeKey);
  };

  /** Asks the store to listen, once per process; waits for it no longer than until `deadline`. */
  private async listen(deadline: number): Promise<void> {
    const { store } = this.options;
    if (!store.listen) return;
    this.listening ??= store.listen(this.wake, this.wakeAll).then(
      // Listening now for good (the store keeps its connection): only a recovery is worth a line.
      () => {
        if (this.listenFailed) this.logger.log(LOGS.listening);
      },
      (err: Error) => {
        // Asked again by the next duplicate; meanwhile waits end with one last look at the store.
        this.listening = undefined;
        if (!this.listenFailed) this.logger.warn(LOGS.listenFailed(err.message));
        this.listenFailed = true;
      },
    );
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, deadline - Date.now())));
    await Promise.race([this.listening, late]).finally(() => clearTimeout(timer));
  }
}
