import { describe, expect, it } from '@jest/globals';
import type { ModuleRef } from '@nestjs/core';
import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import { IdempotencyObserver } from '../../lib/core/events/idempotency.observer.js';
import { type IdempotencyEvent, InMemoryStore } from '../../lib/index.js';
import { resolveModuleOptions } from '../../lib/shared/options/module-options.resolver.js';
import { spyOnLogger } from '../support/logger.js';
import { tick } from '../support/timing.js';

async function observer(events?: (event: IdempotencyEvent) => unknown, openTelemetry = false): Promise<IdempotencyObserver> {
  const options = resolveModuleOptions({ events: events as never, openTelemetry }, () => new InMemoryStore());
  const made = new IdempotencyObserver(options, {} as ModuleRef);
  await made.onModuleInit();
  return made;
}

describe('IdempotencyObserver', () => {
  const logs = spyOnLogger();

  it('is off with no listener and OpenTelemetry off: no clock, no event', async () => {
    const quiet = await observer();
    expect(quiet.enabled).toBe(false);
    expect(quiet.now()).toBe(0);
    expect(quiet.stored('claim', 0)).toBe(0);
  });

  it('hands events over after the current turn, batched, with the key hashed then', async () => {
    const seen: IdempotencyEvent[] = [];
    const watching = await observer((e) => void seen.push(e));
    expect(watching.enabled).toBe(true);
    watching.emit('executed', { route: 'A.b', method: 'POST', status: 201, storeMs: 1.5, key: 'k-1' });
    watching.emit('rejected', { route: 'A.b', method: 'POST', status: 400, code: 'key-missing' });
    expect(seen).toEqual([]);
    await tick();
    expect(seen).toEqual([
      {
        outcome: 'executed',
        route: 'A.b',
        method: 'POST',
        status: 201,
        code: undefined,
        storeMs: 1.5,
        keyHash: createHash('sha256').update('k-1').digest('hex'),
        store: 'InMemoryStore',
        at: expect.any(Number),
      },
      expect.objectContaining({ outcome: 'rejected', code: 'key-missing', storeMs: 0, keyHash: undefined }),
    ]);
  });

  it("delivers each event of a batch in its own request's async context, where a listener finds that request's CLS", async () => {
    const requests = new AsyncLocalStorage<string>();
    const seen: string[] = [];
    const watching = await observer((e) => void seen.push(`${e.outcome} in ${requests.getStore() ?? 'none'}`));
    requests.run('request-1', () => watching.emit('executed', { route: 'A.b' }));
    requests.run('request-2', () => watching.emit('replayed', { route: 'A.b' }));
    watching.emit('lease-lost', { route: 'A.b' });
    await tick();
    expect(seen).toEqual(['executed in request-1', 'replayed in request-2', 'lease-lost in none']);
  });

  it('times store calls and marks spans through OpenTelemetry; lease-lost and evicted are no request outcome on a span', async () => {
    const watching = await observer(undefined, true);
    expect(watching.enabled).toBe(true);
    const calls: unknown[][] = [];
    (watching as unknown as { telemetry: object }).telemetry = {
      storeDuration: (...args: unknown[]) => void calls.push(['duration', ...args]),
      outcome: (...args: unknown[]) => void calls.push(['outcome', ...args]),
      mark: (...args: unknown[]) => void calls.push(['mark', ...args]),
    };
    const startedAt = watching.now();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const ms = watching.stored('commit', startedAt);
    expect(ms).toBeGreaterThanOrEqual(15);
    expect(ms).toBeLessThan(5000);
    watching.mark('executed');
    for (const outcome of ['lease-lost', 'evicted', 'conflict'] as const) watching.emit(outcome, { route: 'A.b' });
    expect(calls).toEqual([
      ['duration', 'commit', 'InMemoryStore', ms],
      ['mark', 'executed'],
      ['outcome', 'lease-lost', 'A.b', undefined, 'InMemoryStore'],
      ['outcome', 'evicted', 'A.b', undefined, 'InMemoryStore'],
      ['outcome', 'conflict', 'A.b', undefined, 'InMemoryStore'],
      ['mark', 'conflict'],
    ]);
  });

  it('with a listener and OpenTelemetry off, times without recording', async () => {
    const watching = await observer(() => undefined);
    expect(watching.stored('claim', watching.now())).toBeGreaterThanOrEqual(0);
  });

  it('counts only promises as unsettled: a synchronous listener gets every event of a batch', async () => {
    let calls = 0;
    const watching = await observer(() => void calls++);
    for (let i = 0; i < 1003; i++) watching.emit('replayed', { route: 'A.b' });
    await tick();
    expect(calls).toBe(1003);
    expect(logs.errors).not.toHaveBeenCalled();
  });

  // H30 (issue 22 item 16): a `then` getter that throws ended the process (exit 1).
  it('a listener result whose then getter throws is a failed listener, logged, never a crash; the next event still goes out', async () => {
    let calls = 0;
    const watching = await observer(() => {
      calls++;
      return Object.defineProperty({}, 'then', {
        get() {
          throw new Error('then exploded');
        },
      });
    });
    watching.emit('replayed', { route: 'A.b' });
    watching.emit('executed', { route: 'A.b' });
    await tick();
    expect(calls).toBe(2);
    expect(logs.errors.mock.calls).toEqual([
      ['the idempotency events listener failed (requests are not affected; logged at most once a minute): then exploded'],
    ]);
  });

  it('a rejected promise is settled too: after 1000 rejections the listener gets events again', async () => {
    const rejects: ((err: Error) => void)[] = [];
    const watching = await observer(() => new Promise<void>((_, reject) => void rejects.push(reject)));
    for (let i = 0; i < 1000; i++) watching.emit('replayed', { route: 'A.b' });
    await tick();
    for (const reject of rejects.splice(0)) reject(new Error('listener down'));
    await tick();
    watching.emit('replayed', { route: 'A.b' });
    await tick();
    expect(rejects).toHaveLength(1);
    expect(logs.errors.mock.calls).toEqual([
      ['the idempotency events listener failed (requests are not affected; logged at most once a minute): listener down'],
    ]);
  });

  it('drops events while 1000 listener calls are unsettled, and says so once', async () => {
    const settle: (() => void)[] = [];
    const watching = await observer(() => new Promise<void>((resolve) => void settle.push(resolve)));
    for (let i = 0; i < 1003; i++) watching.emit('replayed', { route: 'A.b', method: 'POST' });
    await tick();
    expect(settle).toHaveLength(1000);
    expect(logs.errors.mock.calls).toEqual([
      [
        'the idempotency events listener has 1000 calls unsettled; events are dropped until they settle (1 so far; logged at most once a minute)',
      ],
    ]);
    for (const resolve of settle.splice(0)) resolve();
    await tick();
    watching.emit('replayed', { route: 'A.b', method: 'POST' });
    await tick();
    expect(settle).toHaveLength(1);
  });
});
