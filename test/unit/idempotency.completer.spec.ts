import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { Injectable, Scope } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import type { AbandonedRun, IdempotencyClaim, PhaseAdvance, RecoveryPoint, SqlExecutor } from '../../lib/stores/index.js';
import { IdempotencyCompleter, IdempotencyModule, InMemoryStore, type PhasedRun, PhasedWorkflow } from '../../lib/index.js';
import { spyOnLogger } from '../support/logger.js';

/** InMemoryStore with recovery points kept in a map: what the completer asks of a store, and nothing more. */
class PointsStore extends InMemoryStore {
  readonly points = new Map<string, RecoveryPoint>();
  runs: AbandonedRun[] | Error = [];
  claimFails = new Set<string>();

  abandonedRuns(_idleMs: number, batch: number): Promise<AbandonedRun[]> {
    if (this.runs instanceof Error) return Promise.reject(this.runs);
    return Promise.resolve(this.runs.slice(0, batch));
  }

  override claim(key: string, claim: IdempotencyClaim) {
    if (this.claimFails.has(key)) return Promise.reject(new Error('store down'));
    return super.claim(key, claim);
  }

  recoveryPoint(key: string): Promise<RecoveryPoint | undefined> {
    return Promise.resolve(this.points.get(key));
  }

  advanceIn(_sql: SqlExecutor, key: string, _owner: string, advance: PhaseAdvance): Promise<boolean> {
    const point = this.points.get(key)!;
    this.points.set(key, { ...point, results: { ...point.results, [advance.phase]: JSON.parse(advance.result) as unknown } });
    return Promise.resolve(true);
  }

  finishIn(): Promise<boolean> {
    return Promise.resolve(true);
  }
}

const transactions = { run: <T>(work: (sql: SqlExecutor) => Promise<T>) => work({ query: () => Promise.resolve([]) }) };
const calls: Array<{ by: string; input: unknown; done: readonly string[] }> = [];
const control: { gate?: Promise<void>; entered?: () => void; failWith?: Error } = {};

@Injectable()
class Rides {
  @PhasedWorkflow('book')
  async book(run: PhasedRun, input: unknown): Promise<unknown> {
    calls.push({ by: 'rides', input, done: run.done });
    await run.phase('ride', () => 1);
    control.entered?.();
    if (control.gate) await control.gate;
    if (control.failWith) throw control.failWith;
    return run.finish(() => ({ ok: true }));
  }

  /** A method without the decorator: never a workflow, not even of a run that names none. */
  plain(): void {
    calls.push({ by: 'plain', input: undefined, done: [] });
  }
}

/** A workflow of the same name on a request-scoped provider: it has no instance to call, so it is never found. */
@Injectable({ scope: Scope.REQUEST })
class PerRequest {
  @PhasedWorkflow('book')
  book(): Promise<void> {
    calls.push({ by: 'per-request', input: undefined, done: [] });
    return Promise.resolve();
  }
}

const modules: Array<{ close(): Promise<void> }> = [];

async function completer(store: InMemoryStore = new PointsStore()) {
  const moduleRef = await Test.createTestingModule({
    imports: [IdempotencyModule.forRoot({ store, transactions, completer: { intervalMs: 0, idleMs: 5, batch: 2 } })],
    providers: [Rides, PerRequest, { provide: 'NOTHING', useValue: null }],
  }).compile();
  await moduleRef.init();
  modules.push(moduleRef);
  return { completer: moduleRef.get(IdempotencyCompleter), moduleRef, store: store as PointsStore };
}

function abandon(store: PointsStore, key: string, point: Partial<RecoveryPoint> = {}): void {
  const full = { fingerprint: 'fp', results: { ride: 1 }, workflow: 'book', input: { rider: key }, ...point };
  store.points.set(key, full);
  (store.runs as AbandonedRun[]).push({ key, ...full });
}

const claim = { owner: 'client', fingerprint: 'fp', leaseMs: 10_000 };

describe('IdempotencyCompleter', () => {
  const logs = spyOnLogger();
  afterEach(async () => {
    await Promise.all(modules.splice(0).map((m) => m.close()));
    calls.length = 0;
    delete control.gate;
    delete control.entered;
    delete control.failWith;
  });

  it('calls the workflow again with the stored input, skipping committed phases; finish() becomes its last phase; the key is free after', async () => {
    const { completer: c, store } = await completer();
    abandon(store, 'a');
    expect(await c.completeAbandoned()).toBe(1);
    expect(calls).toEqual([{ by: 'rides', input: { rider: 'a' }, done: ['ride'] }]);
    expect(store.points.get('a')!.results).toEqual({ ride: 1, 'finish()': { ok: true } });
    // Released, not stored: the client's retry claims the key and renders the response.
    expect(await store.claim('a', claim)).toEqual({ state: 'claimed' });
    expect(logs.warnings).not.toHaveBeenCalled();
  });

  it('finds its workflows once, on its first look', async () => {
    const { completer: c, moduleRef, store } = await completer();
    const providers = jest.spyOn(moduleRef.get(DiscoveryService), 'getProviders');
    abandon(store, 'one');
    expect(await c.completeAbandoned()).toBe(1);
    store.runs = [];
    abandon(store, 'two');
    expect(await c.completeAbandoned()).toBe(1);
    expect(providers).toHaveBeenCalledTimes(1);
    expect(calls.map((call) => call.by)).toEqual(['rides', 'rides']);
  });

  it('leaves a run of a workflow it does not know, or of none, and says so', async () => {
    const { completer: c, store } = await completer();
    abandon(store, 'other', { workflow: 'refund' });
    abandon(store, 'unnamed', { workflow: undefined });
    expect(await c.completeAbandoned()).toBe(0);
    expect(calls).toEqual([]);
    expect(logs.warnings.mock.calls.map((args: unknown[]) => args[0])).toEqual([
      "an abandoned run of refund waits: no @PhasedWorkflow('refund') here",
      "an abandoned run of undefined waits: no @PhasedWorkflow('undefined') here",
    ]);
  });

  it('does not run a run whose key a client holds, or whose recovery point is gone or another request’s by now', async () => {
    const { completer: c, store } = await completer();
    abandon(store, 'held');
    await store.claim('held', claim);
    abandon(store, 'gone');
    store.points.delete('gone');
    (store.runs as AbandonedRun[]).push({ key: 'moved', fingerprint: 'fp', results: {}, workflow: 'book' });
    store.points.set('moved', { fingerprint: 'another request', results: {} });
    expect(await c.completeAbandoned()).toBe(0);
    store.runs = (store.runs as AbandonedRun[]).slice(2);
    expect(await c.completeAbandoned()).toBe(0);
    expect(calls).toEqual([]);
    expect(logs.warnings).not.toHaveBeenCalled();
    // The keys it claimed are free again; the client's is still the client's.
    expect(await store.claim('gone', claim)).toEqual({ state: 'claimed' });
    expect(await store.claim('moved', claim)).toEqual({ state: 'claimed' });
    expect(await store.claim('held', { ...claim, owner: 'another' })).toMatchObject({ state: 'in-flight' });
  });

  it('a failed look, claim or workflow is logged and tried again later; the key is released', async () => {
    const { completer: c, store } = await completer();
    store.runs = new Error('database down');
    expect(await c.completeAbandoned()).toBe(0);
    store.runs = [];
    abandon(store, 'broken');
    store.claimFails.add('broken');
    expect(await c.completeAbandoned()).toBe(0);
    store.runs = [];
    abandon(store, 'failing');
    control.failWith = new Error('provider down');
    expect(await c.completeAbandoned()).toBe(0);
    expect(logs.warnings.mock.calls.map((args: unknown[]) => args[0])).toEqual([
      'completing a run of (looking) failed; tried again later: database down',
      'completing a run of book failed; tried again later: store down',
      'completing a run of book failed; tried again later: provider down',
    ]);
    expect(await store.claim('failing', claim)).toEqual({ state: 'claimed' });
  });

  it('a run that failed is not tried again on the next look, but after its pause (see CompleterBackoff)', async () => {
    const { completer: c, store } = await completer();
    abandon(store, 'failing');
    control.failWith = new Error('provider down');
    expect(await c.completeAbandoned()).toBe(0);
    expect(await c.completeAbandoned()).toBe(0);
    expect(calls.filter((call) => call.by === 'rides')).toHaveLength(1);
    expect(logs.warnings).toHaveBeenCalledTimes(1);
  });

  it('on a store without recovery points it finds nothing, quietly', async () => {
    const { completer: c } = await completer(new InMemoryStore());
    expect(await c.completeAbandoned()).toBe(0);
    expect(logs.warnings).not.toHaveBeenCalled();
  });

  it('a shutdown waits for the run under way and starts no other; a look under way is shared', async () => {
    const { completer: c, store } = await completer();
    abandon(store, 'first');
    abandon(store, 'second');
    let release!: () => void;
    control.gate = new Promise((resolve) => (release = resolve));
    const entered = new Promise<void>((resolve) => (control.entered = resolve));
    const look = c.completeAbandoned();
    expect(c.completeAbandoned()).toBe(look);
    await entered;
    let closed = false;
    const closing = c.beforeApplicationShutdown().then(() => (closed = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(closed).toBe(false);
    release();
    await closing;
    expect(await look).toBe(1);
    expect(calls.map((call) => call.input)).toEqual([{ rider: 'first' }]);
  });
});
