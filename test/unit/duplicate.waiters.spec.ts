import { describe, expect, it, jest } from '@jest/globals';
import { type ExecutionContext, Logger } from '@nestjs/common';
import type { ClaimOutcome } from '../../lib/stores/index.js';
import { IdempotencyException, InMemoryStore, type IdempotencyEvent, type IdempotencyStore } from '../../lib/index.js';
import { IdempotentReplay } from '../../lib/shared/exceptions/idempotent-replay.exception.js';
import { resolveModuleOptions } from '../../lib/shared/options/module-options.resolver.js';
import { DuplicateWaiters } from '../../lib/core/waiting/duplicate.waiters.js';
import { KeyWaiter } from '../../lib/core/waiting/key.waiter.js';
import { resolvedRoute } from '../support/claims.js';
import { spyOnLogger } from '../support/logger.js';
import { createProtocol, destroyProtocolsAfterEach } from '../support/protocol.js';
import { sampleRecord } from '../support/store-contract.js';
import { sleep, tick, until } from '../support/timing.js';
import { rejection } from '../support/rejection.js';

const context = {} as ExecutionContext;
const request = (key: string, amount = 1) => ({
  method: 'POST',
  url: '/pay',
  headers: { 'idempotency-key': key },
  body: { amount },
});

function waiters(store: Partial<IdempotencyStore> = {}, maxWaiters = 1_000): DuplicateWaiters {
  return new DuplicateWaiters(
    resolveModuleOptions({ store: Object.assign(new InMemoryStore(), store), maxWaiters }, () => new InMemoryStore()),
  );
}

describe('KeyWaiter', () => {
  it('a wake-up before the wait is kept for it; one during it ends it; the deadline ends it with false', async () => {
    const waiter = new KeyWaiter('k', Date.now() + 60_000);
    waiter.notify();
    expect(await waiter.next()).toBe(true);
    const woken = waiter.next();
    await tick();
    waiter.notify();
    expect(await woken).toBe(true);
    // Used up: the next wait does not end at once.
    let settled = false;
    const pending = waiter.next().then((w) => {
      settled = true;
      return w;
    });
    await tick();
    expect(settled).toBe(false);
    waiter.notify();
    expect(await pending).toBe(true);
    expect(await new KeyWaiter('k', Date.now() - 1).next()).toBe(false);
    expect(await new KeyWaiter('k', Date.now() + 20).next()).toBe(false);
  });

  // Issue 44 item 13: a dead owner announces nothing; its waiters slept until waitMs.
  it('looks again at lookAgainAt (true) when it comes before the deadline; the deadline still ends it with false', async () => {
    const waiter = new KeyWaiter('k', Date.now() + 60_000);
    expect(await waiter.next(Date.now() + 20)).toBe(true);
    expect(await waiter.next(Date.now() - 1)).toBe(true);
    expect(await new KeyWaiter('k', Date.now() + 20).next(Date.now() + 60_000)).toBe(false);
    expect(await new KeyWaiter('k', Date.now() + 20).next(Date.now() + 20)).toBe(false);
  });
});

describe('DuplicateWaiters', () => {
  const logs = spyOnLogger();
  it('bounds the waiters at maxWaiters; leaving frees a slot, once', async () => {
    const hub = waiters({}, 2);
    const a = (await hub.enter('k1', 1000))!;
    const b = (await hub.enter('k2', 1000))!;
    expect(await hub.enter('k1', 1000)).toBeUndefined();
    expect(hub.size).toBe(2);
    hub.leave(a);
    hub.leave(a);
    expect(hub.size).toBe(1);
    expect(await hub.enter('k1', 1000)).toBeInstanceOf(KeyWaiter);
    hub.leave(b);
    expect(hub.size).toBe(1);
  });

  it("wakes the settled key's waiters only, and announces it through the store", async () => {
    const announced: string[] = [];
    const hub = waiters({ announce: async (key: string) => void announced.push(key), listen: async () => undefined });
    const a = (await hub.enter('k1', 60_000))!;
    const b = (await hub.enter('k2', 60_000))!;
    hub.settled('k1');
    expect(announced).toEqual(['k1']);
    expect(await a.next()).toBe(true);
    let woken = false;
    void b.next().then(() => (woken = true));
    await tick();
    expect(woken).toBe(false);
    hub.settled('k2');
    await tick();
    expect(woken).toBe(true);
  });

  it('one look at a key at a time: those meanwhile share its outcome, but never a claim it won, nor its failure', async () => {
    const hub = waiters();
    let looks = 0;
    let answer!: (outcome: ClaimOutcome) => void;
    const look = () => {
      looks++;
      return new Promise<ClaimOutcome>((resolve) => (answer = resolve));
    };
    const record = { state: 'completed', record: sampleRecord('fp') } as const;
    const [mine, shared] = [hub.look('k', look), hub.look('k', look)];
    const other = hub.look('other', async () => ({ state: 'claimed' }));
    answer(record);
    expect(await mine).toBe(record);
    expect(await shared).toBe(record);
    expect(await other).toEqual({ state: 'claimed' });
    expect(looks).toBe(1);

    const [winner, loser] = [hub.look('k', look), hub.look('k', look)];
    answer({ state: 'claimed' });
    expect(await winner).toEqual({ state: 'claimed' });
    expect(await loser).toBeUndefined();

    const failing = hub.look('k', () => Promise.reject(new Error('ECONNRESET')));
    const sharer = hub.look('k', look);
    await expect(failing).rejects.toThrow('ECONNRESET');
    expect(await sharer).toBeUndefined();
    // Over: the next look is a look of its own.
    const next = hub.look('k', look);
    answer(record);
    expect(await next).toBe(record);
    expect(looks).toBe(3);
  });

  it('a waiter woken by a settle never shares a look begun before it (decided in flight before the settle)', async () => {
    const hub = waiters();
    let stale!: (outcome: ClaimOutcome) => void;
    const before = hub.look('k', () => new Promise<ClaimOutcome>((resolve) => (stale = resolve)));
    hub.settled('k');
    const record = { state: 'completed', record: sampleRecord('fp') } as const;
    const after = hub.look('k', async () => record);
    // The earlier look ends after the later one began: it must not end the later one's sharing either.
    stale({ state: 'in-flight', fingerprint: 'fp' });
    expect(await before).toEqual({ state: 'in-flight', fingerprint: 'fp' });
    let third!: (outcome: ClaimOutcome) => void;
    const shared = hub.look('k', () => new Promise<ClaimOutcome>((resolve) => (third = resolve)));
    const sharer = hub.look('k', async () => ({ state: 'claimed' }));
    third(record);
    expect([await after, await shared, await sharer]).toEqual([record, record, record]);
  });

  it('is not closing until the application shuts down; with nobody waiting, the shutdown goes on at once', async () => {
    const hub = waiters();
    expect(hub.closing).toBe(false);
    let done = false;
    const shutdown = hub.beforeApplicationShutdown().then(() => (done = true));
    expect(hub.closing).toBe(true);
    // Nothing to wait for: not even a turn.
    for (let i = 0; i < 10; i++) await Promise.resolve();
    expect(done).toBe(true);
    await shutdown;
  });

  it('a graceful shutdown waits until every duplicate has left its wait, then for the turn that answers it', async () => {
    const hub = waiters();
    const one = (await hub.enter('k', 60_000))!;
    const two = (await hub.enter('j', 60_000))!;
    let done = false;
    const shutdown = hub.beforeApplicationShutdown().then(() => (done = true));
    hub.leave(one);
    await sleep(20);
    expect(done).toBe(false);
    hub.leave(two);
    // Not in the same promise jobs: the duplicate's answer is written in them.
    for (let i = 0; i < 10; i++) await Promise.resolve();
    expect(done).toBe(false);
    await shutdown;
  });

  it("a graceful shutdown waits no longer than a second past the last waiter's deadline", async () => {
    jest.useFakeTimers({ now: 1_000_000, doNotFake: ['setImmediate'] });
    const hub = waiters();
    await hub.enter('k', 5_000);
    await hub.enter('j', 8_000);
    let done = false;
    const shutdown = hub.beforeApplicationShutdown().then(() => (done = true));
    await jest.advanceTimersByTimeAsync(8_999);
    await tick();
    expect(done).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    await shutdown;
    jest.useRealTimers();
  });

  it('leaves no timer behind once the store listens', async () => {
    jest.useFakeTimers();
    const hub = waiters({ listen: async () => undefined });
    await hub.enter('k', 60_000);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('asks the store to listen once, on the first wait, and wakes what it hears', async () => {
    let heard: ((key: string) => void) | undefined;
    let listens = 0;
    const hub = waiters({
      listen: async (listener: (key: string) => void) => {
        listens++;
        heard = listener;
      },
    });
    const logged = jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
    expect(listens).toBe(0);
    const a = (await hub.enter('k1', 60_000))!;
    await hub.enter('k1', 60_000);
    expect(listens).toBe(1);
    // Listening from the start is no news.
    expect(logged).not.toHaveBeenCalled();
    expect(logs.warnings).not.toHaveBeenCalled();
    heard!('k1');
    expect(await a.next()).toBe(true);
  });

  it("wakes every waiter when the store's listening connection is back: what was announced meanwhile was not heard", async () => {
    let resumed: (() => void) | undefined;
    const hub = waiters({
      listen: async (_listener: (key: string) => void, onResumed?: () => void) => {
        resumed = onResumed;
      },
    });
    const [a, b, c] = [(await hub.enter('k1', 60_000))!, (await hub.enter('k2', 60_000))!, (await hub.enter('k2', 60_000))!];
    resumed!();
    expect(await Promise.all([a.next(), b.next(), c.next()])).toEqual([true, true, true]);
  });

  it('a listener that fails is logged once and asked again by the next waiter; its recovery is logged', async () => {
    const logged = jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
    let fail = true;
    let listens = 0;
    const hub = waiters({
      listen: async () => {
        listens++;
        if (fail) throw new Error('no route to Redis');
      },
    });
    await hub.enter('k', 60_000);
    expect(logs.warnings).toHaveBeenCalledTimes(1);
    await hub.enter('k', 60_000);
    expect(listens).toBe(2);
    expect(logs.warnings.mock.calls.map((c: unknown[]) => String(c[0]))).toEqual([
      "waiting duplicates are woken by this process only (the store's listener failed): no route to Redis",
    ]);
    fail = false;
    await hub.enter('k', 60_000);
    await hub.enter('k', 60_000);
    expect(listens).toBe(3);
    expect(logged.mock.calls.map((c) => String(c[0]))).toEqual([
      'waiting duplicates are woken by every process again (the store listens)',
    ]);
  });

  it('waits for a listener that hangs no longer than the wait', async () => {
    const hub = waiters({ listen: () => new Promise<void>(() => undefined) });
    expect(await hub.enter('k', 20)).toBeInstanceOf(KeyWaiter);
  });

  it('an announcement that fails is logged, never thrown', async () => {
    const hub = waiters({ announce: () => Promise.reject(new Error('READONLY')) });
    hub.settled('k');
    await tick();
    expect(logs.warnings).toHaveBeenCalledWith('a settled key was not announced (waiters elsewhere wait out waitMs): READONLY');
  });
});

describe("IdempotencyService with inFlight: 'wait'", () => {
  destroyProtocolsAfterEach();
  spyOnLogger();
  const waiting = resolvedRoute({ waitMs: 60_000 });

  it('looks again once registered, then when woken; replays what the first stored', async () => {
    const { store, begin, waiters: hub } = createProtocol();
    // The fingerprint of this request, as the store keeps it: from a first claim of the same request.
    const first = (await begin(request('k'), context, resolvedRoute()))!;
    const inFlight = { state: 'in-flight' as const, fingerprint: first.fingerprint };
    const answers = [inFlight, inFlight];
    store.claimAnswer = async () => answers.shift() ?? { state: 'completed', record: sampleRecord(first.fingerprint) };
    const claims = store.calls.length;
    const duplicate = begin(request('k'), context, waiting);
    await until(() => hub.size === 1 && store.calls.length === claims + 2);
    hub.settled(first.storeKey);
    expect(await rejection(duplicate)).toBeInstanceOf(IdempotentReplay);
    expect(store.calls.length).toBe(claims + 3);
    expect(hub.size).toBe(0);
  });

  it('only claims of a waiting route wake waiters when they settle', async () => {
    const { begin, waiters: hub } = createProtocol();
    expect((await begin(request('a'), context, resolvedRoute()))!.onSettled).toBeUndefined();
    expect((await begin(request('b'), context, waiting))!.onSettled).toBe(hub.settled);
  });

  it('a duplicate past maxWaiters gets 409 without waiting', async () => {
    const { store, begin, waiters: hub } = createProtocol({ maxWaiters: 1 });
    const first = (await begin(request('k'), context, resolvedRoute()))!;
    store.claimAnswer = async () => ({ state: 'in-flight', fingerprint: first.fingerprint });
    const waitingOne = begin(request('k'), context, waiting);
    await tick();
    const err = await rejection(begin(request('k'), context, waiting));
    expect((err as IdempotencyException).code).toBe('key-in-flight');
    store.claimAnswer = async () => ({ state: 'completed', record: sampleRecord(first.fingerprint) });
    hub.settled(first.storeKey);
    expect(await rejection(waitingOne)).toBeInstanceOf(IdempotentReplay);
  });

  it('woken during a graceful shutdown, a duplicate that wins the key gives it back and answers 503', async () => {
    const { store, begin, waiters: hub } = createProtocol();
    const first = (await begin(request('k'), context, resolvedRoute()))!;
    store.claimAnswer = async () => ({ state: 'in-flight', fingerprint: first.fingerprint });
    const duplicate = begin(request('k'), context, waiting);
    await until(() => hub.size === 1);
    await tick();
    void hub.beforeApplicationShutdown();
    store.claimAnswer = async () => ({ state: 'claimed' });
    hub.settled(first.storeKey);
    const err = (await rejection(duplicate)) as IdempotencyException;
    expect(err.code).toBe('shutting-down');
    expect(err.getStatus()).toBe(503);
    const last = store.calls.at(-1)!;
    expect(last[0]).toBe('release');
    expect(last[1]).toBe(first.storeKey);
  });

  it("a claim the store fails counts the time it took in the request's storeMs", async () => {
    const events: IdempotencyEvent[] = [];
    const { store, begin, observer } = createProtocol({ events: (event) => void events.push(event) });
    await observer.onModuleInit();
    store.claimAnswer = () => new Promise((_, reject) => setTimeout(reject, 20, new Error('ECONNRESET')));
    expect(((await rejection(begin(request('k'), context, waiting))) as IdempotencyException).code).toBe('store-unavailable');
    await until(() => events.length === 1);
    expect(events[0]).toMatchObject({ outcome: 'store-unavailable' });
    expect(events[0].storeMs).toBeGreaterThanOrEqual(15);
  });

  it('a store that fails while the duplicate looks again answers 503 and leaves no waiter', async () => {
    const { store, begin, waiters: hub } = createProtocol();
    const first = (await begin(request('k'), context, resolvedRoute()))!;
    store.claimAnswer = async () => ({ state: 'in-flight', fingerprint: first.fingerprint });
    const duplicate = begin(request('k'), context, waiting);
    await until(() => hub.size === 1);
    store.claimAnswer = () => Promise.reject(new Error('ECONNRESET'));
    hub.settled(first.storeKey);
    expect(((await rejection(duplicate)) as IdempotencyException).code).toBe('store-unavailable');
    expect(hub.size).toBe(0);
  });
});
