import { Inject, Injectable } from '@nestjs/common';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../../shared/idempotency.constants.js';
import { FAILURES } from '../../shared/messages/operator.messages.js';
import type { ResolvedIdempotencyOptions } from '../../shared/interfaces/resolved-options.interface.js';
import { RouteOptionsRegistry } from '../../nest/route-options.registry.js';
import { withTimeout } from '../../shared/utils/timeout.util.js';
import { answersPing } from '../../stores/contract/store.capabilities.js';

/** How long a store may take to answer the health check by default, in ms. */
export const DEFAULT_HEALTH_TIMEOUT_MS = 1000;

/** Options of {@link IdempotencyHealthIndicator.isHealthy}. */
export interface IdempotencyHealthOptions {
  /** How long the store may take to answer, in ms; slower is down. Default 1000. */
  timeoutMs?: number;
}

/** The store's state under the indicator's key, in `@nestjs/terminus`'s `HealthIndicatorResult` shape. */
export type IdempotencyHealthResult<Key extends string = string> = Record<
  Key,
  { status: 'up'; store: string; latencyMs: number } | { status: 'down'; store: string; message: string }
>;

/**
 * A health indicator for `@nestjs/terminus`: up when the idempotency store answers a ping within the
 * timeout, down with the store's error sentence otherwise (a down store means every `@Idempotent()`
 * request gets 503; a store without the recovery points `atomicPhases` routes use is down too). It
 * returns Terminus's result shape and imports nothing of Terminus, so it costs nothing where Terminus
 * is not installed: `health.check([() => idempotency.isHealthy('idempotency')])`.
 */
@Injectable()
export class IdempotencyHealthIndicator {
  /** @internal Nest's injector builds it: inject it, do not construct it. */
  constructor(
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly routes: RouteOptionsRegistry,
  ) {}

  async isHealthy<Key extends string>(key: Key, options: IdempotencyHealthOptions = {}): Promise<IdempotencyHealthResult<Key>> {
    const { store } = this.options;
    const name = store.constructor.name;
    const timeoutMs = options.timeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS;
    const startedAt = performance.now();
    try {
      if (!answersPing(store)) throw new Error(FAILURES.noPing(name));
      const needs = { recoveryPoints: this.routes.usesRecoveryPoints };
      await withTimeout(store.ping(needs), timeoutMs, () => new Error(FAILURES.pingTimeout(timeoutMs)));
      const latencyMs = Math.round((performance.now() - startedAt) * 100) / 100;
      return { [key]: { status: 'up', store: name, latencyMs } } as IdempotencyHealthResult<Key>;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      return { [key]: { status: 'down', store: name, message } } as IdempotencyHealthResult<Key>;
    }
  }
}
