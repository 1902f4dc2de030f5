import { describe, expect, it } from '@jest/globals';
import { type Attempt, check, type CheckOptions, type FaultWindow, type HistoryLine } from './history.js';

// The checker on hand-made histories: each guarantee it reads is shown failing on a history that
// breaks it, so a chaos run that reports nothing has really found nothing.

const final = (status: number) => status === 201 || status === 402;
const options: CheckOptions = { answerWithinMs: 2000, final };

const run = (runId: string, pod: string, at: number, end: number | undefined, tenant = 'alice', key = 'k'): HistoryLine[] => [
  { t: 'run', runId, pod, route: 'slow', tenant, key, at },
  ...(end === undefined ? [] : [{ t: 'end' as const, runId, outcome: 'returned' as const, at: end }]),
];
const event = (outcome: string, pod: string, at: number, tenant = 'alice', key = 'k'): HistoryLine => ({
  t: 'event',
  pod,
  outcome,
  tenant,
  key,
  at,
});
const answer = (at: number, runId: string, over: Partial<Attempt> = {}): Attempt => ({
  tenant: 'alice',
  key: 'k',
  pod: 'p0',
  sentAt: at - 10,
  doneAt: at,
  status: 201,
  text: JSON.stringify({ tenant: over.tenant ?? 'alice', key: 'k', runId }),
  replayed: false,
  ...over,
});

describe('the history checker', () => {
  it('passes a clean history: one run, stored, replayed once', () => {
    const lines = [...run('a', 'p0', 100, 200), event('executed', 'p0', 210), event('replayed', 'p1', 300)];
    const verdict = check(lines, [answer(210, 'a'), answer(300, 'a', { pod: 'p1', replayed: true })], [], options);
    expect(verdict).toEqual({
      requests: 2,
      runs: 1,
      doubles: 0,
      stuck: 0,
      maxAfterHealMs: 0,
      lostLeases: 0,
      notStored: 0,
      stalls: 0,
      storeStalls: 0,
      waiters: 0,
      violations: [],
    });
  });

  it('counts a run that started after the key was stored as a double, whatever the fault', () => {
    const lines = [...run('a', 'p0', 100, 200), event('executed', 'p0', 210), ...run('b', 'p1', 400, 500)];
    const fault: FaultWindow = { name: 'kill', startAt: 0, healAt: 1000, pods: ['p0', 'p1'] };
    const verdict = check(lines, [answer(210, 'a')], [fault], options);
    expect(verdict.doubles).toBe(1);
    expect(verdict.violations).toContain("alice/k: run b started after the key's response was stored");
  });

  it('counts overlapping runs as a double unless the first pod was under the fault or lost its lease while the store was cut off', () => {
    const overlapping = [...run('a', 'p0', 100, 900), ...run('b', 'p1', 500, 600)];
    expect(check(overlapping, [answer(600, 'b')], [], options).violations).toEqual([
      'alice/k: run b started while a was still running',
    ]);
    const paused: FaultWindow = { name: 'pause', startAt: 200, healAt: 700, pods: ['p0'] };
    expect(check(overlapping, [answer(600, 'b')], [paused], options).doubles).toBe(0);
    const reported = [...overlapping, event('lease-lost', 'p0', 450)];
    const partition: FaultWindow = { name: 'partition', startAt: 200, healAt: 300, pods: [], cutsStore: true };
    expect(check(reported, [answer(600, 'b')], [partition], options)).toMatchObject({ doubles: 0, violations: [] });
    // A lease lost by the other tenant's request of the same key excuses nothing.
    const otherTenant = [...overlapping, event('lease-lost', 'p0', 450, 'bob')];
    expect(check(otherTenant, [answer(600, 'b')], [], options).doubles).toBe(1);
  });

  it('flags a lost lease or an unstored response unless a fault cut the store off or touched the pod', () => {
    const lines = [...run('a', 'p0', 100, 900), event('lease-lost', 'p0', 450), event('not-stored', 'p0', 910)];
    const healthy = check(lines, [answer(1000, 'a')], [], options);
    expect(healthy).toMatchObject({ lostLeases: 1, notStored: 1 });
    expect(healthy.violations).toEqual([
      'alice/k: lease-lost on p0 with no fault cutting the store off',
      'alice/k: not-stored on p0 with no fault cutting the store off',
    ]);
    // Latency cuts nothing off: the library must keep its leases and commits through it.
    const latency: FaultWindow = { name: 'latency', startAt: 0, healAt: 2000, pods: [] };
    expect(check(lines, [answer(1000, 'a')], [latency], options).violations).toHaveLength(2);
    // A store cut off until 100 ms excuses what happens within answerWithinMs (2 s) of the heal, no later.
    const cut: FaultWindow = { name: 'stall', startAt: 0, healAt: 100, pods: [], cutsStore: true };
    expect(check(lines, [answer(1000, 'a')], [cut], options).violations).toEqual([]);
    expect(check(lines, [answer(1000, 'a')], [{ ...cut, startAt: -3000, healAt: -1600 }], options).violations).toHaveLength(2);
    const paused: FaultWindow = { name: 'pause', startAt: 0, healAt: 0, pods: ['p0'] };
    expect(check(lines, [answer(1000, 'a')], [paused], options).violations).toEqual([]);
    // A pod the machine starved (its event loop stood still) is paused as surely: on that pod, within
    // answerWithinMs of the stall's end, and on no other pod.
    const starved: HistoryLine = { t: 'stall', pod: 'p0', from: 300, at: 800 };
    expect(check([...lines, starved], [answer(1000, 'a')], [], options).violations).toEqual([]);
    expect(check([...lines, { ...starved, pod: 'p1' }], [answer(1000, 'a')], [], options).violations).toHaveLength(2);
    expect(check([...lines, { ...starved, from: -3000, at: -2500 }], [answer(1000, 'a')], [], options).violations).toHaveLength(
      2,
    );
    // The path to the store stood still (the proxies' process, the store server): every pod, in the same window.
    const storeStall: HistoryLine = { t: 'stall', pod: 'proxies', from: 300, at: 800, store: true };
    expect(check([...lines, storeStall], [answer(1000, 'a')], [], options)).toMatchObject({
      violations: [],
      stalls: 0,
      storeStalls: 1,
    });
    expect(
      check([...lines, { ...storeStall, from: -3000, at: -2500 }], [answer(1000, 'a')], [], options).violations,
    ).toHaveLength(2);
  });

  it('counts a run after one that returned as a double, and not after one that threw', () => {
    const returned = [...run('a', 'p0', 100, 200), ...run('b', 'p1', 300, 400)];
    expect(check(returned, [answer(400, 'b')], [], options)).toMatchObject({
      doubles: 1,
      violations: ['alice/k: run b started after a had returned'],
    });
    const threw: HistoryLine[] = [
      { t: 'run', runId: 'a', pod: 'p0', route: 'flaky', tenant: 'alice', key: 'k', at: 100 },
      { t: 'end', runId: 'a', outcome: 'threw', at: 200 },
      ...run('b', 'p1', 300, 400),
    ];
    expect(check(threw, [answer(400, 'b')], [], options)).toMatchObject({ doubles: 0, violations: [] });
  });

  it('treats a run that never ended (its pod was killed) as running forever', () => {
    const lines = [...run('a', 'p0', 100, undefined), ...run('b', 'p1', 5000, 5100)];
    expect(check(lines, [answer(5100, 'b')], [], options).doubles).toBe(1);
    const killed: FaultWindow = { name: 'kill', startAt: 300, healAt: 300, pods: ['p0'] };
    expect(check(lines, [answer(5100, 'b')], [killed], options).doubles).toBe(0);
  });

  it('excuses a run that returned just before its pod was killed and whose pod stored nothing for the key by then', () => {
    // Returned at 200, its commit still on the way when the pod died at 300: the lease lapses and p1 runs the key.
    const lines = [...run('a', 'p0', 100, 200), ...run('b', 'p1', 1500, 1600)];
    const killed: FaultWindow = { name: 'kill', startAt: 300, healAt: 300, pods: ['p0'] };
    expect(check(lines, [answer(1600, 'b')], [killed], options)).toMatchObject({ doubles: 0 });
    // Not when another pod was killed, nor when the run returned longer than answerWithinMs before the kill.
    expect(check(lines, [answer(1600, 'b')], [{ ...killed, pods: ['p2'] }], options).doubles).toBe(1);
    expect(check(lines, [answer(1600, 'b')], [{ ...killed, startAt: 2300, healAt: 2300 }], options).doubles).toBe(1);
    // Nor when the run started after the kill (a pod of the same name would be a bug of the runner).
    expect(
      check([...run('a', 'p0', 400, 500), ...run('b', 'p1', 1500, 1600)], [answer(1600, 'b')], [killed], options).doubles,
    ).toBe(1);
    // Its pod had stored the response before the kill: the later run came after the key was stored.
    expect(check([...lines, event('executed', 'p0', 250)], [answer(1600, 'b')], [killed], options).violations).toEqual([
      "alice/k: run b started after the key's response was stored",
    ]);
  });

  it('wants the same bytes in every final answer, unless a run of the key was not stored', () => {
    const lines = [...run('a', 'p0', 100, 200), ...run('b', 'p1', 300, 400)];
    const answers = [answer(200, 'a'), answer(400, 'b')];
    expect(check(lines, answers, [], options).violations).toEqual([
      'alice/k: run b started after a had returned',
      expect.stringMatching(/^alice\/k: 2 different final answers: /),
    ]);
    const cut: FaultWindow = { name: 'partition', startAt: 150, healAt: 250, pods: [], cutsStore: true };
    expect(check([...lines, event('not-stored', 'p0', 210)], answers, [cut], options).violations).toEqual([]);
  });

  // Issue 44 items 12 and 13: duplicates that waited their full waitMs for an answer ready much earlier.
  it('flags a waiter of a wait run answered later than the run settled (or its waitMs on another pod), unless excused', () => {
    const waits = { slackMs: 500, acrossPods: true, waitMs: 5000 };
    const lines: HistoryLine[] = [
      { t: 'run', runId: 'w', pod: 'p0', route: 'wait', tenant: 'alice', key: 'k', at: 100 },
      { t: 'end', runId: 'w', outcome: 'returned', at: 500 },
      event('executed', 'p0', 510),
    ];
    const owner = answer(510, 'w', { sentAt: 90 });
    const waiter = (pod: string, doneAt: number, status = 201) =>
      answer(doneAt, 'w', { pod, sentAt: 200, status, replayed: true, text: status === 201 ? owner.text : '{}' });
    const late = (attempts: Attempt[], over: Partial<CheckOptions> = {}, faults: FaultWindow[] = []) =>
      check(lines, [owner, ...attempts], faults, { ...options, waits, ...over }).violations;
    expect(late([waiter('p1', 900), waiter('p0', 1000)])).toEqual([]);
    expect(check(lines, [owner, waiter('p1', 900)], [], { ...options, waits }).waiters).toBe(1);
    expect(late([waiter('p1', 5200, 409)])).toEqual([
      'alice/k: a duplicate on p1 waiting for w was answered 4700 ms after it returned (409)',
    ]);
    expect(late([waiter('p0', 1001)])).toEqual([
      'alice/k: a duplicate on p0 waiting for w was answered 501 ms after it returned (201)',
    ]);
    // Another pod, on a store that wakes no other pod: it finds the replay when its waitMs ends.
    expect(late([waiter('p1', 5600)], { waits: { ...waits, acrossPods: false } })).toEqual([]);
    expect(late([waiter('p1', 5800)], { waits: { ...waits, acrossPods: false } })).toHaveLength(1);
    expect(late([waiter('p0', 1200)], { waits: { ...waits, acrossPods: false } })).toHaveLength(1);
    // Excused: a fault on the waiter's pod; an attempt answered before the run or sent after it; no answer; no waits option.
    expect(late([waiter('p1', 5200)], {}, [{ name: 'kill', startAt: 0, healAt: 6000, pods: ['p1'] }])).toEqual([]);
    expect(late([{ ...waiter('p1', 5200), sentAt: 600 }, { ...waiter('p1', 90), sentAt: 50 }, waiter('p1', 5200, 0)])).toEqual(
      [],
    );
    // A double click: both sent before the run began; the one answered fresh is the run's own.
    expect(late([{ ...waiter('p1', 5200), sentAt: 90 }])).toHaveLength(1);
    expect(late([{ ...waiter('p1', 5200), sentAt: 90, replayed: false }])).toEqual([]);
    expect(check(lines, [owner, waiter('p1', 5200)], [], options).violations).toEqual([]);
  });

  it("flags an answer carrying another tenant's response", () => {
    const lines = run('a', 'p0', 100, 200, 'bob');
    const verdict = check(
      lines,
      [answer(200, 'a', { tenant: 'alice', text: JSON.stringify({ tenant: 'bob', key: 'k' }) })],
      [],
      options,
    );
    expect(verdict.violations).toEqual(["alice/k: answered with bob/k's response"]);
  });

  it("flags an event delivered in another request's async context", () => {
    const lines: HistoryLine[] = [
      ...run('a', 'p0', 100, 200),
      { t: 'event', pod: 'p0', outcome: 'executed', tenant: 'alice', key: 'k', context: 'bob/j', at: 210 },
      { t: 'event', pod: 'p0', outcome: 'lease-lost', tenant: 'alice', key: 'k', context: 'bob/j', at: 150 },
      { t: 'event', pod: 'p0', outcome: 'replayed', tenant: 'alice', key: 'k', context: 'alice/k', at: 300 },
    ];
    const pause: FaultWindow = { name: 'pause', startAt: 0, healAt: 1000, pods: ['p0'] };
    expect(check(lines, [answer(210, 'a')], [pause], options).violations).toEqual([
      "alice/k: its executed event reached the listener in bob/j's context",
    ]);
  });

  it('counts a key without a final answer, or answered too long after the heal, as stuck', () => {
    const fault: FaultWindow = { name: 'partition', startAt: 100, healAt: 1000, pods: [] };
    const never = check([], [answer(900, '', { status: 409, text: '{}' })], [fault], options);
    expect(never.stuck).toBe(1);
    expect(never.violations).toEqual(['alice/k: no final answer (last: 409)']);
    const late = check(
      run('a', 'p0', 3500, 3600),
      [answer(50, '', { status: 0, text: 'TimeoutError' }), answer(3600, 'a')],
      [fault],
      options,
    );
    expect(late).toMatchObject({ stuck: 1, maxAfterHealMs: 2600, violations: ['alice/k: answered 2600 ms after the heal'] });
    const inTime = check(
      run('a', 'p0', 1500, 1600),
      [answer(50, '', { status: 0, text: 'TimeoutError' }), answer(1600, 'a')],
      [fault],
      options,
    );
    expect(inTime).toMatchObject({ stuck: 0, maxAfterHealMs: 600, violations: [] });
  });

  it('reports claims the store still holds, and business rows other than one per answered key', () => {
    const verdict = check([], [answer(200, 'a'), answer(300, 'b', { key: 'j', text: '{}' })], [], {
      ...options,
      heldClaims: ['alice/x'],
      rows: new Map([['alice/k', 2]]),
    });
    expect(verdict.doubles).toBe(1);
    expect(verdict.runs).toBe(2);
    expect(verdict.violations).toEqual([
      'alice/k: 2 business rows for one answered key',
      'alice/j: 0 business rows for one answered key',
      'alice/x: the store still holds a live claim after the run',
    ]);
  });

  it('flags a phased key whose provider was called more often than a crash explains, or never although it was answered', () => {
    const attempts = [answer(200, 'a'), answer(300, 'b', { key: 'j', text: '{}' }), answer(400, 'c', { key: 'm', text: '{}' })];
    const calls = new Map([
      ['alice/k', 3],
      ['alice/j', 0],
      ['alice/m', 2],
    ]);
    expect(check([], attempts, [], { ...options, foreign: { calls, max: 2 } }).violations).toEqual([
      'alice/k: 3 calls to the provider for one derived key',
      'alice/j: answered without a call to the provider under the key its run derives',
    ]);
    calls.set('alice/k', 1).set('alice/j', 1);
    expect(check([], attempts, [], { ...options, foreign: { calls, max: 2 } }).violations).toEqual([]);
    // A declined ride (its stored 402) is unfinished by design; one answered 201 is not.
    const declined = answer(500, 'd', { key: 'n', status: 402, text: '{}' });
    expect(check([], [...attempts, declined], [], { ...options, unfinished: ['alice/k', 'alice/n'] }).violations).toEqual([
      'alice/k: answered as done, but its work was left half done',
    ]);
  });

  it('flags a request sent after the answer that got no replay, unless a fault explains it or the answer was not stored', () => {
    const after = (status: number, pod = 'p0') =>
      answer(600, 'a', { sentAt: 500, status, pod, ...(status === 201 ? {} : { text: '{}' }) });
    expect(check([], [answer(200, 'a'), after(500)], [], options).violations).toEqual([
      'alice/k: a request after its answer got 500 instead of the replay',
    ]);
    expect(check([], [answer(200, 'a'), after(0), after(201)], [], options).violations).toEqual([]);
    // The client's replay check, sent in the millisecond its answer came back.
    const sameMs = { ...answer(200, 'b', { sentAt: 200, status: 500, text: '{}' }), check: true as const };
    expect(check([], [answer(200, 'a'), sameMs], [], options).violations).toEqual([
      'alice/k: a request after its answer got 500 instead of the replay',
    ]);
    const cut: FaultWindow = { name: 'partition', startAt: 400, healAt: 700, pods: [], cutsStore: true };
    expect(check([], [answer(200, 'a'), after(503)], [cut], options).violations).toEqual([]);
    const unstored = [event('not-stored', 'p0', 150)];
    expect(check(unstored, [answer(200, 'a'), after(500)], [], options).violations).toEqual([
      'alice/k: not-stored on p0 with no fault cutting the store off',
    ]);
  });
});
