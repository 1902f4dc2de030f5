import { afterEach, expect, it } from '@jest/globals';
import { Body, Controller, HttpException, type INestApplication, Post } from '@nestjs/common';
import {
  Idempotent,
  IdempotencyKey,
  type IdempotencyModuleOptions,
  IdempotencyModule,
  type IdempotencyStore,
} from '../../lib/index.js';
import { DuplicateWaiters } from '../../lib/core/waiting/duplicate.waiters.js';
import { type AdapterName, listen, startApp } from './app.js';
import { Gate, Runs } from './fixtures.js';
import { sleep, until } from './timing.js';

/** What a long wait is here: a duplicate that is not woken answers only after it, past any bound below. */
export const LONG_WAIT_MS = 60_000;
/** A woken duplicate answers within this after the first did: a bound, far under {@link LONG_WAIT_MS}. */
const WOKEN_WITHIN_MS = 10_000;

/** The wait of `/wait/brief`'s duplicates: far over its 30 ms handler, so reaching it means a lost wake-up. */
export const BRIEF_WAIT_MS = 8_000;

/** Keys whose first run failed already: shared by every application of the process (pods on one store). */
const failedOnce = new Set<string>();

@Controller('wait')
export class WaitController {
  constructor(
    private readonly runs: Runs,
    private readonly gate: Gate,
  ) {}

  @Post('pay')
  @Idempotent({ inFlight: 'wait', waitMs: LONG_WAIT_MS })
  async pay(@Body() body: { amount: number; fail?: boolean }, @IdempotencyKey() key: string) {
    const run = this.runs.hit('pay');
    await this.gate.pass();
    // The provider failed: the key is freed, and a duplicate waiting for it runs the handler itself.
    if (body.fail && !failedOnce.has(key)) {
      failedOnce.add(key);
      throw new HttpException({ error: 'provider down' }, 502);
    }
    return { run, amount: body.amount };
  }

  @Post('short')
  @Idempotent({ inFlight: 'wait', waitMs: 1_000 })
  async short() {
    const run = this.runs.hit('short');
    await this.gate.pass();
    return { run };
  }

  /** A short handler whose duplicates may wait long: one that waits its whole wait was never woken. */
  @Post('brief')
  @Idempotent({ inFlight: 'wait', waitMs: BRIEF_WAIT_MS })
  async brief() {
    const run = this.runs.hit('brief');
    await new Promise((resolve) => setTimeout(resolve, 30));
    return { run };
  }

  @Post('conflict')
  @Idempotent()
  async conflict() {
    const run = this.runs.hit('conflict');
    await this.gate.pass();
    return { run };
  }
}

/** One application (a pod): its URL, its handler counts, its gate and its waiting duplicates. */
export interface WaitPod {
  readonly app: INestApplication;
  readonly base: string;
  readonly runs: Runs;
  readonly gate: Gate;
  readonly waiters: DuplicateWaiters;
}

export async function startWaitPod(
  adapter: AdapterName,
  store: IdempotencyStore,
  options: IdempotencyModuleOptions = {},
): Promise<WaitPod> {
  const app = await startApp(adapter, {
    imports: [IdempotencyModule.forRoot({ store, ...options })],
    controllers: [WaitController],
    providers: [Runs, Gate],
  });
  const base = await listen(app);
  return { app, base, runs: app.get(Runs), gate: app.get(Gate), waiters: app.get(DuplicateWaiters) };
}

export interface Answer {
  status: number;
  text: string;
  replayed: boolean;
  /** When the answer came (epoch ms). */
  at: number;
}

let seq = 0;
export const waitKey = (): string => `wait-${process.pid}-${Date.now()}-${++seq}`;

export async function post(base: string, path: string, key: string, body: object = { amount: 5 }): Promise<Answer> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'idempotency-key': key, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, replayed: res.headers.get('idempotent-replayed') === 'true', at: Date.now() };
}

/**
 * The behaviour of `inFlight: 'wait'`, with the first request sent to `pods().first` and its
 * duplicates to `pods().second`: the same application (woken in the process), or another one on the
 * same store (woken through it).
 */
export function waitingScenarios(pods: () => { first: WaitPod; second: WaitPod }): void {
  // A test that fails half-way leaves no handler held for the next one, or for the shutdown.
  afterEach(() => pods().first?.gate.release());
  const runsOf = (name: string): number => {
    const { first, second } = pods();
    return first.runs.of(name) + (second === first ? 0 : second.runs.of(name));
  };

  it('a duplicate sent while the first runs waits, is woken when it is stored, and gets its replay', async () => {
    const { first, second } = pods();
    const key = waitKey();
    const before = runsOf('pay');
    const { answer: original } = await first.gate.hold(() => post(first.base, '/wait/pay', key));
    const waiting = second.waiters.size;
    const duplicate = post(second.base, '/wait/pay', key);
    await until(() => second.waiters.size === waiting + 1, WOKEN_WITHIN_MS);
    first.gate.release();
    const [a, b] = await Promise.all([original, duplicate]);
    expect(a).toMatchObject({ status: 201, replayed: false });
    expect(b).toMatchObject({ status: 201, replayed: true, text: a.text });
    expect(runsOf('pay')).toBe(before + 1);
    // Woken, not found by its last look at the end of the wait.
    expect(b.at - a.at).toBeLessThan(WOKEN_WITHIN_MS);
    expect(second.waiters.size).toBe(waiting);
  });

  it('a duplicate of a first that fails (the key is freed) runs the handler itself', async () => {
    const { first, second } = pods();
    const key = waitKey();
    const before = runsOf('pay');
    const { answer: original } = await first.gate.hold(() => post(first.base, '/wait/pay', key, { amount: 5, fail: true }));
    const waiting = second.waiters.size;
    const duplicate = post(second.base, '/wait/pay', key, { amount: 5, fail: true });
    await until(() => second.waiters.size === waiting + 1, WOKEN_WITHIN_MS);
    first.gate.release();
    const [a, b] = await Promise.all([original, duplicate]);
    expect(a.status).toBe(502);
    expect(b).toMatchObject({ status: 201, replayed: false });
    expect(JSON.parse(b.text)).toEqual({ run: expect.any(Number), amount: 5 });
    expect(runsOf('pay')).toBe(before + 2);
    expect(b.at - a.at).toBeLessThan(WOKEN_WITHIN_MS);
  });

  it('a duplicate waits no longer than waitMs: then 409, while the first still runs', async () => {
    const { first, second } = pods();
    const key = waitKey();
    const { answer: original } = await first.gate.hold(() => post(first.base, '/wait/short', key));
    const sentAt = Date.now();
    const duplicate = await post(second.base, '/wait/short', key);
    expect(duplicate.status).toBe(409);
    expect(JSON.parse(duplicate.text)).toEqual({ error: 'idempotency-key in-flight; retry shortly' });
    // waitMs is 1 000: not answered before it, and not long after (a bound for a loaded machine).
    expect(duplicate.at - sentAt).toBeGreaterThanOrEqual(1_000);
    expect(duplicate.at - sentAt).toBeLessThan(1_000 + WOKEN_WITHIN_MS);
    expect(second.waiters.size).toBe(0);
    first.gate.release();
    expect((await original).status).toBe(201);
  });

  it('the same key with another request while the first runs gets 422 at once, without waiting', async () => {
    const { first, second } = pods();
    const key = waitKey();
    const { answer: original } = await first.gate.hold(() => post(first.base, '/wait/pay', key, { amount: 5 }));
    const other = await post(second.base, '/wait/pay', key, { amount: 6 });
    expect(other.status).toBe(422);
    expect(second.waiters.size).toBe(0);
    first.gate.release();
    expect((await original).status).toBe(201);
  });

  it("a route without inFlight: 'wait' still answers 409 at once", async () => {
    const { first, second } = pods();
    const key = waitKey();
    const { answer: original } = await first.gate.hold(() => post(first.base, '/wait/conflict', key));
    expect((await post(second.base, '/wait/conflict', key)).status).toBe(409);
    expect(second.waiters.size).toBe(0);
    first.gate.release();
    expect((await original).status).toBe(201);
  });
}

/**
 * `count` duplicates of one held request wait on `second` at once (each a connection of its own to
 * the application), `during()` runs while they all wait, then the first is let go and every one gets
 * its replay: the handler ran once.
 */
export async function manyWaiters(first: WaitPod, second: WaitPod, count: number, during: () => Promise<void>): Promise<void> {
  const key = waitKey();
  const before = first.runs.of('pay') + (second === first ? 0 : second.runs.of('pay'));
  const { answer: original } = await first.gate.hold(() => post(first.base, '/wait/pay', key));
  const waiting = second.waiters.size;
  // A claim the store sheds under the burst (503: no connection free in time) never waits: its client
  // sends it again, as a client does, until it waits too.
  const deadline = Date.now() + 60_000;
  const duplicate = async (): Promise<Answer> => {
    for (;;) {
      const answer = await post(second.base, '/wait/pay', key);
      if (answer.status !== 503 || Date.now() > deadline) return answer;
      await sleep(50);
    }
  };
  const duplicates = Array.from({ length: count }, duplicate);
  await until(() => second.waiters.size === waiting + count, 60_000);
  await during();
  first.gate.release();
  const a = await original;
  const answers = await Promise.all(duplicates);
  expect(answers.filter((b) => b.status === 201 && b.replayed && b.text === a.text)).toHaveLength(count);
  expect(first.runs.of('pay') + (second === first ? 0 : second.runs.of('pay'))).toBe(before + 1);
}

/** How a test restarts the store's server under waiting duplicates, and when the second pod listens. */
export interface Restart {
  /** The duplicate has registered, and its looks are where the restart cannot lose them. */
  ready(): boolean | Promise<boolean>;
  /** Stops the server, does what should happen while it is down, and starts it again. */
  restart(): Promise<void>;
  /** The second pod listens again. */
  listening(): boolean | Promise<boolean>;
}

/**
 * A duplicate waiting on `second` while the store's server restarts is woken once `second` listens
 * again and the first request, let go only then, is stored: it gets the replay, the handler ran once.
 */
export async function waitThroughRestart(first: WaitPod, second: WaitPod, how: Restart): Promise<void> {
  const key = waitKey();
  const { answer: original } = await first.gate.hold(() => post(first.base, '/wait/pay', key));
  const duplicate = post(second.base, '/wait/pay', key);
  await until(async () => second.waiters.size === 1 && (await how.ready()));
  await how.restart();
  await until(how.listening, 30_000);
  first.gate.release();
  const [a, b] = await Promise.all([original, duplicate]);
  expect(a).toMatchObject({ status: 201, replayed: false });
  expect(b).toMatchObject({ status: 201, replayed: true, text: a.text });
  expect(first.runs.of('pay') + second.runs.of('pay')).toBe(1);
}
