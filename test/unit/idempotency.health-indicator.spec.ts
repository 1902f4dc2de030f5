import { describe, expect, it, jest } from '@jest/globals';
import { IdempotencyHealthIndicator, type IdempotencyStore, InMemoryStore } from '../../lib/index.js';
import { resolveModuleOptions } from '../../lib/shared/options/module-options.resolver.js';
import { RouteOptionsRegistry } from '../../lib/nest/route-options.registry.js';
import { sleep } from '../support/timing.js';

const indicator = (cache: IdempotencyStore, phased = false) => {
  const options = resolveModuleOptions({ store: cache }, () => new InMemoryStore());
  const routes = new RouteOptionsRegistry(options);
  routes.usesRecoveryPoints = phased;
  return new IdempotencyHealthIndicator(options, routes);
};

/** A real InMemoryStore that answers its ping after `ms`. */
class SlowCache extends InMemoryStore {
  constructor(private readonly ms: number) {
    super();
  }
  override async ping(): Promise<void> {
    await sleep(this.ms);
  }
}

describe('IdempotencyHealthIndicator', () => {
  it('reports the latency of the ping in ms, to two decimals', async () => {
    const { db } = await indicator(new SlowCache(40)).isHealthy('db');
    expect(db).toMatchObject({ status: 'up', store: 'SlowCache' });
    const { latencyMs } = db as { latencyMs: number };
    expect(latencyMs).toBeGreaterThanOrEqual(35);
    expect(latencyMs).toBeLessThan(5000);
    expect(Math.round(latencyMs * 100) / 100).toBe(latencyMs);
  });

  it('asks the store for recovery points only when a route has atomicPhases', async () => {
    const asked: unknown[] = [];
    class Asked extends InMemoryStore {
      override async ping(needs?: unknown): Promise<void> {
        asked.push(needs);
      }
    }
    await indicator(new Asked()).isHealthy('a');
    await indicator(new Asked(), true).isHealthy('b');
    expect(asked).toEqual([{ recoveryPoints: false }, { recoveryPoints: true }]);
  });

  it('is down for a store without ping(), naming it', async () => {
    const { claim, commit, release, renew } = new InMemoryStore();
    const bare: IdempotencyStore = { claim, commit, release, renew };
    expect(await indicator(bare).isHealthy('idem')).toEqual({
      idem: {
        status: 'down',
        store: 'Object',
        message: 'Object has no ping(), so its health cannot be checked (see IdempotencyStore)',
      },
    });
  });

  it('leaves no timer behind once the store has answered', async () => {
    jest.useFakeTimers();
    try {
      await indicator(new InMemoryStore()).isHealthy('idem', { timeoutMs: 60_000 });
      expect(jest.getTimerCount()).toBe(0);
    } finally {
      jest.useRealTimers();
    }
  });
});
