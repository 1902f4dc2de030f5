import { Inject, Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { IdempotencyObserver } from './events/idempotency.observer.js';
import { IDEMPOTENCY_MODULE_OPTIONS } from './idempotency.constants.js';
import { LOGS } from './idempotency.messages.js';
import type { ActiveClaim } from './interfaces/active-claim.interface.js';
import type { ResolvedIdempotencyOptions } from './interfaces/resolved-options.interface.js';

/**
 * Keeps the leases of running handlers alive, so a slow handler keeps its key while a crashed one
 * loses it after one lease. One timer serves every held claim; it starts with the first claim and
 * is left running (unref'd), so the request path never creates one.
 */
@Injectable()
export class LeaseRenewer implements OnModuleDestroy {
  private readonly logger = new Logger('Idempotency');
  private readonly held = new Set<ActiveClaim>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly observer: IdempotencyObserver,
  ) {}

  /** Renews the claim's lease every third of it until {@link unhold}, for at most `maxHoldMs`. */
  hold(claim: ActiveClaim): void {
    this.held.add(claim);
    if (this.timer) return;
    const { leaseMs } = this.options;
    this.timer = setInterval(() => this.renewAll(), Math.floor(leaseMs / 3));
    this.timer.unref();
  }

  unhold(claim: ActiveClaim): void {
    this.held.delete(claim);
  }

  onModuleDestroy(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.held.clear();
  }

  private renewAll(): void {
    const { leaseMs, maxHoldMs, store } = this.options;
    const now = Date.now();
    for (const c of this.held) {
      if (now - c.claimedAt >= maxHoldMs) {
        this.held.delete(c);
        this.logger.warn(LOGS.heldTooLong(c.route, maxHoldMs));
        continue;
      }
      const startedAt = this.observer.now();
      store.renew(c.cacheKey, c.owner, leaseMs).then(
        (renewed) => {
          this.observer.stored('renew', startedAt);
          if (renewed) return;
          this.logger.warn(LOGS.leaseLost(c.route));
          this.observer.emit('lease-lost', { route: c.route, method: c.method, key: c.key });
        },
        (err: Error) => this.logger.error(LOGS.renewalFailed(c.route, err.message)),
      );
    }
  }
}
