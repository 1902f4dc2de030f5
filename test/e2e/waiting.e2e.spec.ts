import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { InMemoryStore } from '../../lib/index.js';
import { ADAPTERS } from '../support/app.js';
import { openStore, storeNames } from '../support/stores.js';
import { until } from '../support/timing.js';
import { BRIEF_WAIT_MS, post, startWaitPod, type WaitPod, waitingScenarios, waitKey } from '../support/waiting.js';

// inFlight: 'wait' in one process, on every store: the duplicate is woken by the settle itself.
const MATRIX = ADAPTERS.flatMap((adapter) => storeNames('waiting e2e on PostgreSQL').map((store) => [adapter, store] as const));

// The wait of a duplicate is drawn in docs/guides/flows.md ("A concurrent duplicate: 409, or a wait").
describe.each(MATRIX)("inFlight: 'wait' on %s with the %s store", (adapter, storeName) => {
  let pod: WaitPod;
  beforeAll(async () => {
    pod = await startWaitPod(adapter, (await openStore(storeName)).cache);
  });
  afterAll(() => pod.app.close());

  waitingScenarios(() => ({ first: pod, second: pod }));
});

describe.each(ADAPTERS)("inFlight: 'wait' bounds on %s", (adapter) => {
  it('bursts of 10 duplicates of a 30 ms handler on InMemoryStore: no duplicate waits its waitMs (a lost wake-up)', async () => {
    const pod = await startWaitPod(adapter, new InMemoryStore());
    try {
      const slowest: number[] = [];
      // 100 keys, 10 at a time, each sent 10 times at once.
      for (let round = 0; round < 10; round++) {
        const keys = Array.from({ length: 10 }, () => waitKey());
        const sent = Date.now();
        const answers = await Promise.all(
          keys.flatMap((key) => Array.from({ length: 10 }, () => post(pod.base, '/wait/brief', key))),
        );
        expect(answers.map((a) => a.status)).toEqual(answers.map(() => 201));
        slowest.push(Math.max(...answers.map((a) => a.at - sent)));
      }
      expect(pod.runs.of('brief')).toBe(100);
      // Each answer came before its wait could have run out: every duplicate was woken by the settle.
      expect(slowest.filter((ms) => ms >= BRIEF_WAIT_MS)).toEqual([]);
    } finally {
      await pod.app.close();
    }
  }, 120_000);

  it('maxWaiters duplicates wait; one more gets 409 at once; the waiting ones get the replay', async () => {
    const pod = await startWaitPod(adapter, new InMemoryStore(), { maxWaiters: 2 });
    try {
      const key = waitKey();
      const { answer: original } = await pod.gate.hold(() => post(pod.base, '/wait/pay', key));
      const waiting = [post(pod.base, '/wait/pay', key), post(pod.base, '/wait/pay', key)];
      await until(() => pod.waiters.size === 2);
      expect((await post(pod.base, '/wait/pay', key)).status).toBe(409);
      pod.gate.release();
      const first = await original;
      for (const answer of await Promise.all(waiting))
        expect(answer).toMatchObject({ status: 201, replayed: true, text: first.text });
      expect(pod.runs.of('pay')).toBe(1);
      expect(pod.waiters.size).toBe(0);
    } finally {
      await pod.app.close();
    }
  });

  it('two duplicates of a first that fails: one runs the handler, the other waits for it and gets its replay', async () => {
    const pod = await startWaitPod(adapter, new InMemoryStore());
    try {
      const key = waitKey();
      const body = { amount: 5, fail: true };
      const { answer: original } = await pod.gate.hold(() => post(pod.base, '/wait/pay', key, body));
      const duplicates = [post(pod.base, '/wait/pay', key, body), post(pod.base, '/wait/pay', key, body)];
      await until(() => pod.waiters.size === 2);
      pod.gate.release();
      expect((await original).status).toBe(502);
      const answers = await Promise.all(duplicates);
      // Woken together, they look once: the look's claim is one waiter's; the other waits for its run.
      const ran = answers.filter((a) => a.status === 201 && !a.replayed);
      expect(ran).toHaveLength(1);
      expect(answers.filter((a) => a !== ran[0])).toEqual([
        expect.objectContaining({ status: 201, replayed: true, text: ran[0].text }),
      ]);
      expect(pod.runs.of('pay')).toBe(2);
    } finally {
      await pod.app.close();
    }
  });

  it("the module's inFlight: 'wait' applies to every route that does not say otherwise", async () => {
    const pod = await startWaitPod(adapter, new InMemoryStore(), { inFlight: 'wait', waitMs: 30_000 });
    try {
      const key = waitKey();
      const { answer: original } = await pod.gate.hold(() => post(pod.base, '/wait/conflict', key));
      const duplicate = post(pod.base, '/wait/conflict', key);
      await until(() => pod.waiters.size === 1);
      pod.gate.release();
      const [a, b] = await Promise.all([original, duplicate]);
      expect(b).toMatchObject({ status: 201, replayed: true, text: a.text });
    } finally {
      await pod.app.close();
    }
  });

  it('a graceful shutdown while a duplicate waits: the first finishes during the drain, the duplicate gets its replay', async () => {
    const pod = await startWaitPod(adapter, new InMemoryStore());
    const key = waitKey();
    const { answer: original } = await pod.gate.hold(() => post(pod.base, '/wait/pay', key));
    const duplicate = post(pod.base, '/wait/pay', key);
    await until(() => pod.waiters.size === 1);
    const closed = pod.app.close();
    await until(() => pod.waiters.closing);
    pod.gate.release();
    const [a, b] = await Promise.all([original, duplicate]);
    expect(a).toMatchObject({ status: 201, replayed: false });
    expect(b).toMatchObject({ status: 201, replayed: true, text: a.text });
    await closed;
  });
});
