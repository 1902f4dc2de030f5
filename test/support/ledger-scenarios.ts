import { expect, it } from '@jest/globals';
import { charge, crashed, retryUntilSettled } from './ledger-client.js';
import type { Pod, PodOptions } from './pod.js';
import { pooled } from './pod.js';
import { sleep } from './timing.js';

/** What the exactly-once scenarios need of the database the ledger sample runs on. */
export interface LedgerDatabase {
  /** As the tests name it: "PostgreSQL", "MariaDB". */
  readonly name: string;
  /** A ledger pod on this suite's database (killed after each test by the caller). */
  start(over?: Partial<PodOptions>): Promise<Pod>;
  /** Charges of a key. */
  rows(key: string): Promise<number>;
  /** The id of a key's one charge. */
  chargeId(key: string): Promise<number>;
  /** Until a handler has written its (uncommitted) charge. */
  untilInserted(): Promise<void>;
  stopServer(): Promise<void>;
  resumeServer(): Promise<void>;
  /** Whether a key's charge and its idempotency record were written by one transaction, where the database can tell. */
  sameTransaction?(key: string): Promise<boolean>;
}

/**
 * The ledger sample's exactly-once promise across processes, the same on every database it runs on:
 * one charge per key through retries, a stampede, a pod killed before and after COMMIT, a lease
 * outrun, and the database stopped mid-handler. Call inside the suite's describe.
 */
export function ledgerScenarios(db: LedgerDatabase): void {
  it('ten retries: one charge, nine byte-identical replays, on both adapters', async () => {
    for (const adapter of ['express', 'fastify'] as const) {
      const pod = await db.start({ adapter });
      const key = `ten-${adapter}`;
      const first = await charge(pod.base, key);
      expect(first).toMatchObject({ status: 201, replayed: false });
      for (let i = 0; i < 9; i++) expect(await charge(pod.base, key)).toEqual({ ...first, replayed: true });
      expect(await db.rows(key)).toBe(1);
      // The trap this guards against: withTransaction(() => next.handle()) commits before the handler runs.
      if (db.sameTransaction) expect(await db.sameTransaction(key)).toBe(true);
    }
  }, 90_000);

  it('200 requests with one key over two processes: one charge, only 201, 409 and replays', async () => {
    const [express, fastify] = [await db.start(), await db.start({ adapter: 'fastify', providerLatencyMs: 20 })];
    const answers = await pooled(
      20,
      Array.from({ length: 200 }, (_, i) => () => charge((i % 2 ? fastify : express).base, 'stampede')),
    );
    const firsts = answers.filter((a) => a.status === 201 && !a.replayed);
    expect(firsts).toHaveLength(1);
    expect(answers.every((a) => a.status === 409 || (a.status === 201 && a.text === firsts[0].text))).toBe(true);
    expect(await db.rows('stampede')).toBe(1);
  }, 90_000);

  it('SIGKILL after the INSERT, before COMMIT: no charge; 409 until the lease ends, then exactly one run', async () => {
    const lease = { env: { TRANSACTION_TIMEOUT_MS: '1500' } };
    const doomed = await db.start({ ...lease, providerLatencyMs: 30_000 });
    const healthy = await db.start({ ...lease, adapter: 'fastify' });
    const lost = crashed(charge(doomed.base, 'sigkill'));
    await db.untilInserted();
    await doomed.kill();
    expect(await lost).toBe('connection lost');
    expect(await db.rows('sigkill')).toBe(0);
    expect((await charge(healthy.base, 'sigkill')).status).toBe(409);
    expect(await retryUntilSettled(healthy.base, 'sigkill')).toMatchObject({ status: 201, replayed: false });
    expect(await db.rows('sigkill')).toBe(1);
  }, 90_000);

  it('killed after COMMIT, before the response: the retry is a byte-identical replay, still one charge', async () => {
    const doomed = await db.start({ env: { FAULT: 'after-commit' } });
    expect(await crashed(charge(doomed.base, 'after-commit'))).toBe('connection lost');
    expect(await db.rows('after-commit')).toBe(1);
    const healthy = await db.start({ adapter: 'fastify' });
    const replay = await charge(healthy.base, 'after-commit');
    expect(replay).toMatchObject({ status: 201, replayed: true });
    expect(await charge(healthy.base, 'after-commit')).toEqual(replay);
    expect(JSON.parse(replay.text)).toMatchObject({ id: `ch_${await db.chargeId('after-commit')}`, amount: 100 });
    expect(await db.rows('after-commit')).toBe(1);
  }, 90_000);

  it('a handler slower than its lease, taken over by another process: its transaction rolls back, one charge', async () => {
    const lease = { env: { TRANSACTION_TIMEOUT_MS: '800' } };
    const slow = await db.start({ ...lease, providerLatencyMs: 2000 });
    const fast = await db.start({ ...lease, adapter: 'fastify' });
    const late = charge(slow.base, 'takeover');
    await db.untilInserted();
    await sleep(900);
    const second = await charge(fast.base, 'takeover');
    expect(second).toMatchObject({ status: 201, replayed: false });
    const first = await late;
    expect(first.status).toBe(409);
    expect(await db.rows('takeover')).toBe(1);
    expect(await charge(slow.base, 'takeover')).toEqual({ ...second, replayed: true });
  }, 90_000);

  it(`${db.name} stopped mid-handler: a 5xx now; started again, a retry replays or runs once, never two charges`, async () => {
    const pod = await db.start({ providerLatencyMs: 1000, env: { TRANSACTION_TIMEOUT_MS: '2000' } });
    const during = charge(pod.base, 'outage');
    await db.untilInserted();
    await db.stopServer();
    const now = await during;
    expect(now.status).toBeGreaterThanOrEqual(500);
    await db.resumeServer();
    const after = await retryUntilSettled(pod.base, 'outage');
    expect(after.status).toBe(201);
    expect(await db.rows('outage')).toBe(1);
    expect(await charge(pod.base, 'outage')).toEqual({ ...after, replayed: true });
  }, 90_000);
}
