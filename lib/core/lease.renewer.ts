import { Inject, Injectable, Logger } from '@nestjs/common';
import { AsyncResource } from 'node:async_hooks';
import { IdempotencyObserver } from './events/idempotency.observer.js';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../shared/idempotency.constants.js';
import { LOGS } from '../shared/messages/operator.messages.js';
import type { ActiveClaim } from '../shared/interfaces/active-claim.interface.js';
import type { ResolvedIdempotencyOptions } from '../shared/interfaces/resolved-options.interface.js';
import { calledOrAt } from '../shared/utils/timeout.util.js';

/** First pause before a failed renewal is sent again; it doubles, up to a tick. */
const RETRY_MS = 50;
/** A run of failed renewals is logged at its first failure and then every this many. */
const LOG_EVERY = 20;

/**
 * Keeps the leases of running handlers alive, so a slow handler keeps its key while a crashed one
 * loses it after one lease. One timer serves every held claim, and each tick renews all of them in
 * one store call (`renewAll`): one round trip whatever the number of running handlers, so renewals
 * cannot fall behind on a small pool or a distant database. A failed renewal is sent again at once,
 * not a tick later. The timer starts with the first claim and is left running (unref'd), so the
 * request path never creates one.
 *
 * It renews until the application has shut down: on a graceful shutdown Nest destroys modules
 * before the HTTP server drains, and the handlers still running then must keep their keys until
 * they are committed ({@link drain}, before the application's own shutdown hooks close what those
 * handlers use).
 */
@Injectable()
export class LeaseRenewer {
  private readonly logger = new Logger('Idempotency');
  private readonly held = new Set<ActiveClaim>();
  private timer: NodeJS.Timeout | undefined;
  private retry: NodeJS.Timeout | undefined;
  private renewing = false;
  private failures = 0;
  private drained: (() => void) | undefined;
  // Made at bootstrap, outside any request: the timer runs in it, not in the async context of the
  // request whose claim happened to start it (its renewals traced, and its lease-lost events read
  // by a CLS-reading listener, as that request's otherwise).
  private readonly context = new AsyncResource('IdempotencyLeaseRenewer');
  /** Set by {@link drain}: the application is shutting down, and takes no new keys. */
  draining = false;

  constructor(
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly observer: IdempotencyObserver,
  ) {}

  /** Renews the claim's lease every third of it until {@link unhold}, for at most `maxHoldMs`. */
  hold(claim: ActiveClaim): void {
    this.held.add(claim);
    if (this.timer) return;
    this.timer = this.context.runInAsyncScope(() => setInterval(() => void this.renewAll(), this.tickMs()));
    this.timer.unref();
  }

  unhold(claim: ActiveClaim): void {
    this.held.delete(claim);
    if (this.held.size === 0) this.drained?.();
  }

  /** How many claims are held now (for health and tests). */
  get size(): number {
    return this.held.size;
  }

  /**
   * Takes no new keys from now on ({@link draining}), and resolves once every held claim has been
   * committed or released, renewing them meanwhile; at the
   * latest when the last one reaches `maxHoldMs`, where its renewal would stop anyway. Then stops the
   * timer. The wait keeps the process alive: a pod told to stop still finishes what it started.
   */
  async drain(): Promise<void> {
    this.draining = true;
    if (this.held.size > 0) {
      let latest = 0;
      for (const c of this.held) latest = Math.max(latest, c.claimedAt + this.options.maxHoldMs);
      await calledOrAt(latest, (done) => {
        this.drained = done;
      });
      this.drained = undefined;
    }
    this.stop();
  }

  // `draining` stays set: between the drain and the HTTP server's close, keep-alive connections still
  // bring requests, and a key claimed then would be stranded by the store closing after it.
  private stop(): void {
    clearInterval(this.timer);
    clearTimeout(this.retry);
    this.timer = this.retry = undefined;
    this.held.clear();
  }

  private tickMs(): number {
    return Math.floor(this.options.leaseMs / 3);
  }

  /** One renewal of every held claim, unless one is still under way. */
  private async renewAll(): Promise<void> {
    if (this.renewing) return;
    const { leaseMs, maxHoldMs, store } = this.options;
    const now = Date.now();
    const batch: ActiveClaim[] = [];
    for (const c of this.held) {
      if (now - c.claimedAt < maxHoldMs) {
        batch.push(c);
        continue;
      }
      this.held.delete(c);
      this.logger.warn(LOGS.heldTooLong(c.route, maxHoldMs));
    }
    if (batch.length === 0) return;
    this.renewing = true;
    const startedAt = this.observer.now();
    let answers: boolean[];
    try {
      const owned = batch.map((c) => ({ key: c.storeKey, owner: c.owner }));
      answers = store.renewAll
        ? await store.renewAll(owned, leaseMs)
        : await Promise.all(owned.map((c) => store.renew(c.key, c.owner, leaseMs)));
    } catch (err) {
      this.renewing = false;
      this.observer.stored('renew', startedAt, err);
      this.failed(batch[0].route, err as Error);
      return;
    }
    this.renewing = false;
    this.failures = 0;
    this.observer.stored('renew', startedAt);
    batch.forEach((c, i) => {
      if (answers[i]) return;
      // Committed or released since the renewal was sent (or while it waited): not a loss.
      if (!this.held.has(c) || c.settling) return;
      this.held.delete(c);
      c.lost = true;
      this.logger.warn(LOGS.leaseLost(c.route));
      this.observer.emit('lease-lost', { route: c.route, method: c.method, key: c.key });
    });
  }

  /** Sends the renewal again after a short pause (doubling up to a tick), logging the first failure of a run. */
  private failed(route: string, err: Error): void {
    if (this.failures % LOG_EVERY === 0) this.logger.error(LOGS.renewalFailed(route, err.message));
    const pause = Math.min(RETRY_MS * 2 ** Math.min(this.failures, 10), this.tickMs());
    this.failures++;
    clearTimeout(this.retry);
    this.retry = setTimeout(() => void this.renewAll(), pause);
    this.retry.unref();
  }
}
