import { describe, expect, it } from '@jest/globals';
import { BadRequestException, HttpException, ServiceUnavailableException } from '@nestjs/common';
import { LeaseLost } from '../../lib/shared/exceptions/lease-lost.error.js';
import { FINISHED } from '../../lib/shared/idempotency.constants.js';
import type { IdempotencyStore } from '../../lib/index.js';
import type { PhaseAdvance, SqlExecutor, StoredResponse } from '../../lib/stores/index.js';
import { endsTheRun } from '../../lib/core/phases/phase-error.classifier.js';
import { PhasedRun } from '../../lib/core/phases/phased.run.js';
import { activeClaim } from '../support/claims.js';
import { spyOnLogger } from '../support/logger.js';
import { until } from '../support/timing.js';

const SQL: SqlExecutor = { query: () => Promise.resolve([]) };
const RESPONSE: StoredResponse = { status: 201, headers: {}, body: Buffer.from('{}') };

/** A backend that records what the run asks of it: transactions opened, points advanced, records finished. */
function backend(over: { advanced?: boolean; finished?: boolean } = {}) {
  const seen = { transactions: 0, advances: [] as PhaseAdvance[], finishes: [] as unknown[], rolledBack: 0 };
  const store = {
    advanceIn: (_sql: SqlExecutor, _key: string, _owner: string, point: PhaseAdvance) => {
      seen.advances.push(point);
      return Promise.resolve(over.advanced ?? true);
    },
    finishIn: (_sql: SqlExecutor, _key: string, _owner: string, record: unknown) => {
      seen.finishes.push(record);
      return Promise.resolve(over.finished ?? true);
    },
  } as unknown as IdempotencyStore;
  const transactions = {
    run: async <T>(work: (sql: SqlExecutor) => Promise<T>): Promise<T> => {
      seen.transactions++;
      try {
        return await work(SQL);
      } catch (err) {
        seen.rolledBack++;
        throw err;
      }
    },
  };
  return { seen, backend: { store, transactions, record: (r: StoredResponse) => ({ sealed: r.status }) as never } };
}

describe('PhasedRun', () => {
  const logs = spyOnLogger();
  it('commits each phase in a transaction of its own, with its result as JSON, the lease and the ttl of the claim', async () => {
    const { seen, backend: b } = backend();
    const run = new PhasedRun(activeClaim({ leaseMs: 7, ttlMs: 9 }), undefined, b);
    expect(run.done).toEqual([]);
    expect(await run.phase('one', () => ({ at: new Date(0), gone: undefined }))).toEqual({ at: new Date(0).toJSON() });
    expect(await run.phase('two', () => undefined)).toBeNull();
    expect(seen.transactions).toBe(2);
    expect(seen.advances).toEqual([
      {
        fingerprint: activeClaim().fingerprint,
        phase: 'one',
        result: '{"at":"1970-01-01T00:00:00.000Z"}',
        leaseMs: 7,
        ttlMs: 9,
        workflow: undefined,
        input: undefined,
      },
      expect.objectContaining({ phase: 'two', result: 'null' }),
    ]);
  });

  it('skips the phases of the recovery point, answering their stored results without a transaction', async () => {
    const { seen, backend: b } = backend();
    const point = { fingerprint: 'f', results: { one: { id: 1 }, [FINISHED]: { ok: true } } };
    const run = new PhasedRun(activeClaim(), point, b);
    expect(run.done).toEqual(['one']);
    expect(await run.phase('one', () => ({ id: 2 }))).toEqual({ id: 1 });
    expect(await run.foreign('one-more', () => 'called', undefined)).toBe('called');
    expect(await run.finish(() => ({ ok: false }))).toEqual({ ok: true }); // a completer finished it
    expect(seen.transactions).toBe(1);
  });

  it('done is in the order the point names its phases, when it does', () => {
    const point = { fingerprint: 'f', results: { b: 1, a: 2, [FINISHED]: 3 }, phases: ['a', 'b', FINISHED] };
    expect(new PhasedRun(activeClaim(), point, backend().backend).done).toEqual(['a', 'b']);
    expect(new PhasedRun(activeClaim(), { ...point, phases: undefined }, backend().backend).done).toEqual(['b', 'a']);
  });

  // Issue 44 item 15: a deploy that reordered the phases ran a new one with a committed one not reached yet.
  it('refuses new work (phase, foreign, finish) while a committed phase is not reached yet: phases-changed, nothing run', async () => {
    const point = { fingerprint: 'f', results: { one: 1, two: 2 }, phases: ['one', 'two'] };
    const { seen, backend: b } = backend();
    let called = 0;
    const changed = { code: 'phases-changed', status: 500 };
    const swapped = new PhasedRun(activeClaim(), point, b);
    await expect(swapped.phase('three', () => ++called)).rejects.toMatchObject(changed);
    await expect(swapped.foreign('four', () => ++called)).rejects.toMatchObject(changed);
    await expect(swapped.finish(() => ++called)).rejects.toMatchObject(changed);
    const half = new PhasedRun(activeClaim(), point, b);
    expect(await half.phase('one', () => ++called)).toBe(1);
    await expect(half.phase('three', () => ++called)).rejects.toMatchObject(changed);
    expect(called).toBe(0);
    expect(seen.transactions).toBe(0);
    expect(logs.errors.mock.calls.map((args: unknown[]) => String(args[0]))).toEqual([
      `phased run of key "${activeClaim().storeKey}": an earlier attempt committed ["one","two"], and this one reached "three" before ["one","two"]: the handler's phases changed since (a deploy?). Not run, answering 500 on every retry; finish the run by hand and forget the key (IdempotencyAdmin), or deploy the phases in their earlier order`,
      expect.stringContaining('reached "four" before ["one","two"]'),
      expect.stringContaining('reached "finish()" before ["one","two"]'),
      expect.stringContaining('committed ["one","two"], and this one reached "three" before ["two"]'),
    ]);
    // Committed phases replayed in another order change nothing: all of them are reached before new work.
    const reordered = new PhasedRun(activeClaim(), point, b);
    expect([await reordered.phase('two', () => 0), await reordered.phase('one', () => 0)]).toEqual([2, 1]);
    expect(await reordered.phase('three', () => 3)).toBe(3);
    expect(seen.advances.map((a) => a.phase)).toEqual(['three']);
  });

  it('foreign(): calls out with the derived key, then records the result in the next transaction', async () => {
    const { seen, backend: b } = backend();
    const run = new PhasedRun(activeClaim(), undefined, b);
    const keys: string[] = [];
    const id = await run.foreign(
      'charge',
      (key) => {
        keys.push(key);
        return Promise.resolve({ id: 'ch_1' });
      },
      (_sql, charge) => charge.id,
    );
    expect(id).toBe('ch_1');
    expect(keys).toEqual([run.keyFor('charge')]);
    expect(seen.advances.map((a) => [a.phase, a.result])).toEqual([['charge', '"ch_1"']]);
    expect(await run.foreign('plain', () => ({ n: 1 }))).toEqual({ n: 1 });
    expect(seen.transactions).toBe(2);
  });

  it('keyFor(): 43 base64url characters, stable for a store key and phase, different for any other', () => {
    const { backend: b } = backend();
    const run = new PhasedRun(activeClaim({ storeKey: 'idem:s:k' }), undefined, b);
    const again = new PhasedRun(activeClaim({ storeKey: 'idem:s:k' }), undefined, b);
    const other = new PhasedRun(activeClaim({ storeKey: 'idem:t:k' }), undefined, b);
    expect(run.keyFor('a')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(run.keyFor('a')).toBe(again.keyFor('a'));
    expect(run.keyFor('a')).not.toBe(run.keyFor('b'));
    expect(run.keyFor('a')).not.toBe(other.keyFor('a'));
    // A newline separates the store key from the name: one cannot run into the other.
    const longer = new PhasedRun(activeClaim({ storeKey: 'idem:s:ka' }), undefined, b);
    expect(run.keyFor('ab')).not.toBe(longer.keyFor('b'));
  });

  it('refuses a name used twice, an empty or long one, finish() as a name, a phase after finish(), finish() twice', async () => {
    const { backend: b } = backend();
    const run = new PhasedRun(activeClaim(), undefined, b);
    await run.phase('a', () => 1);
    await expect(run.phase('a', () => 1)).rejects.toThrow('a was used twice in one run, or after finish()');
    await expect(run.phase('', () => 1)).rejects.toThrow("a phase's name must be a string of 1 to 100 characters, not finish()");
    await expect(run.phase('x'.repeat(101), () => 1)).rejects.toThrow("a phase's name must be a string");
    await expect(run.phase(FINISHED, () => 1)).rejects.toThrow("a phase's name must be a string");
    await expect(run.phase(7 as never, () => 1)).rejects.toThrow("a phase's name must be a string");
    expect(await run.phase('x'.repeat(100), () => 2)).toBe(2);
    const finished = run.finish(() => 'done');
    await expect(run.phase('b', () => 1)).rejects.toThrow('b was used twice in one run, or after finish()');
    await expect(run.foreign('c', () => 1)).rejects.toThrow('c was used twice in one run, or after finish()');
    await expect(run.finish(() => 'again')).rejects.toThrow('finish() was used twice in one run');
    expect(await finished).toBe('done');
    run.abandon(new Error('handler gone'));
  });

  it('a fenced write that matches no claim is a LeaseLost, and the transaction rolls back', async () => {
    const { seen, backend: b } = backend({ advanced: false });
    const run = new PhasedRun(activeClaim(), undefined, b);
    await expect(run.phase('a', () => 1)).rejects.toBeInstanceOf(LeaseLost);
    expect(seen.rolledBack).toBe(1);
  });

  it('notes the first error inside a phase that ends the run; others pass through unnoted', async () => {
    const { backend: b } = backend();
    const run = new PhasedRun(activeClaim(), undefined, b);
    const retryable = new ServiceUnavailableException();
    await expect(run.phase('a', () => Promise.reject(retryable))).rejects.toBe(retryable);
    expect(run.endedBy).toBeUndefined();
    const declined = new HttpException('declined', 402);
    await expect(run.foreign('b', () => Promise.reject(declined))).rejects.toBe(declined);
    expect(run.endedBy).toBe(declined);
    await expect(run.phase('c', () => Promise.reject(new BadRequestException()))).rejects.toThrow();
    expect(run.endedBy).toBe(declined);
  });

  it('finish(): its transaction stays open until the response is settled, then finishes the record in it', async () => {
    const { seen, backend: b } = backend();
    const run = new PhasedRun(activeClaim(), undefined, b);
    expect(await run.finish(() => ({ ok: 1 }))).toEqual({ ok: 1 });
    expect(seen.finishes).toEqual([]);
    expect(run.completed).toBe(false);
    await run.settle(RESPONSE);
    expect(seen.finishes).toEqual([{ sealed: 201 }]);
    expect(run.completed).toBe(true);
    expect(seen.transactions).toBe(1);
  });

  it('settle() without finish() finishes the record in a transaction of its own; a lost claim is a LeaseLost', async () => {
    const ok = backend();
    await new PhasedRun(activeClaim(), undefined, ok.backend).settle(RESPONSE);
    expect(ok.seen.transactions).toBe(1);
    const lost = backend({ finished: false });
    const run = new PhasedRun(activeClaim(), undefined, lost.backend);
    await expect(run.settle(RESPONSE)).rejects.toBeInstanceOf(LeaseLost);
    expect(run.completed).toBe(false);
  });

  it("abandon(): finish()'s open transaction rolls back with the handler's error; before the hand-over nothing happens", async () => {
    const { seen, backend: b } = backend();
    const run = new PhasedRun(activeClaim(), undefined, b);
    run.abandon(new Error('nothing open'));
    await run.finish(() => 1);
    const failure = new Error('the handler failed after finish()');
    run.abandon(failure);
    await expect(run.settle(RESPONSE)).rejects.toBe(failure);
    expect(seen.rolledBack).toBe(1);
    expect(seen.finishes).toEqual([]);
  });

  it("a response that never reaches end() within the lease rolls finish()'s transaction back as a LeaseLost", async () => {
    const { seen, backend: b } = backend();
    const run = new PhasedRun(activeClaim({ leaseMs: 20 }), undefined, b);
    expect(await run.finish(() => 1)).toBe(1);
    await until(() => seen.rolledBack === 1);
    const settled = run.settle(RESPONSE);
    await expect(settled).rejects.toBeInstanceOf(LeaseLost);
    await expect(settled).rejects.toThrow('the transaction timeout passed before the response was complete');
    expect(seen.finishes).toEqual([]);
  });

  it('a finish() whose transaction failed after it handed its value over still counts: a second one is refused', async () => {
    const { backend: b } = backend({ finished: false });
    const run = new PhasedRun(activeClaim(), undefined, b);
    expect(await run.finish(() => 1)).toBe(1);
    await expect(run.settle(RESPONSE)).rejects.toBeInstanceOf(LeaseLost);
    await expect(run.finish(() => 2)).rejects.toThrow('finish() was used twice in one run');
  });

  it('a finish() whose callback throws rejects with its error, and a later finish() may run', async () => {
    const { backend: b } = backend();
    const run = new PhasedRun(activeClaim(), undefined, b);
    const failure = new Error('receipt failed');
    await expect(run.finish(() => Promise.reject(failure))).rejects.toBe(failure);
    expect(await run.finish(() => 2)).toBe(2);
  });

  it('completing (a completer drives it): finish() is a phase, named finish(), its value stored; the workflow kept from the start', async () => {
    const { seen, backend: b } = backend();
    const run = new PhasedRun(activeClaim(), undefined, b, true);
    run.resumable('book', { rider: 'r' });
    run.resumable('other', { ignored: true });
    await run.phase('a', () => 1);
    expect(await run.finish(() => ({ ok: true }))).toEqual({ ok: true });
    expect(seen.advances.map((a) => [a.phase, a.result, a.workflow, a.input])).toEqual([
      ['a', '1', 'book', '{"rider":"r"}'],
      [FINISHED, '{"ok":true}', 'book', '{"rider":"r"}'],
    ]);
    expect(seen.finishes).toEqual([]);
    run.resumable('none', undefined);
    const bare = new PhasedRun(activeClaim(), undefined, b);
    bare.resumable('w', undefined);
    await bare.phase('z', () => 0);
    expect(seen.advances.at(-1)).toMatchObject({ workflow: 'w', input: 'null' });
  });
});

describe('endsTheRun', () => {
  it('a 4xx HttpException ends a run, except 408, 409, 425 and 429; a 5xx or any other error does not', () => {
    for (const status of [400, 401, 402, 403, 404, 410, 422, 499]) expect(endsTheRun(new HttpException('x', status))).toBe(true);
    for (const status of [408, 409, 425, 429, 399, 500, 503]) expect(endsTheRun(new HttpException('x', status))).toBe(false);
    expect(endsTheRun(new Error('network'))).toBe(false);
    expect(endsTheRun({ status: 402 })).toBe(false);
    expect(endsTheRun(undefined)).toBe(false);
  });
});
