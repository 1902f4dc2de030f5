import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { built } from '../support/build.js';
import { FakeProvider } from '../support/fake-provider.js';
import { type Answer, Pod } from '../support/pod.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { sleep } from '../support/timing.js';

built('.build');

// A run resumed on another pod after a crash is drawn in docs/guides/recovery-points.md.
const describePg = postgresAvailable('atomic phases across crashing pods') ? describe : describe.skip;

// The ledger sample's rides route (@Idempotent({ atomicPhases: true }): the ride, the charge at a
// payment provider, the receipt) in processes of their own. A pod is killed (SIGKILL) at each point of
// a run; a client's retry on another pod resumes it. The provider is a fake on loopback that counts
// calls per key and deduplicates them as Stripe does.

async function book(base: string, key: string): Promise<Answer> {
  const res = await fetch(`${base}/api/ledger/rides`, {
    method: 'POST',
    headers: { authorization: 'Bearer alice-token', 'idempotency-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ origin: key, destination: 'airport', amount: 2500, currency: 'EUR' }),
  });
  return { status: res.status, text: await res.text(), replayed: res.headers.get('idempotent-replayed') === 'true' };
}

/** Retries while the key is held (409: the dead pod's lease runs out) or a dependency is away (5xx), as a client would. */
async function retryUntilSettled(base: string, key: string): Promise<Answer> {
  let answer = await book(base, key);
  for (let i = 0; i < 200 && (answer.status === 409 || answer.status >= 500); i++) {
    await sleep(50);
    answer = await book(base, key);
  }
  return answer;
}

describePg('atomic phases: a pod killed at each point of a run, and a retry on another pod', () => {
  let server: PostgresServer;
  let url: string;
  let provider: FakeProvider;
  let healthy: Pod;
  const pods: Pod[] = [];
  const start = async (env: NodeJS.ProcessEnv = {}): Promise<Pod> => {
    const pod = await Pod.start({
      sample: 'ledger',
      store: 'postgres',
      postgresUrl: url,
      leaseMs: 1_000,
      env: { PAYMENT_PROVIDER_URL: provider.url, ...env },
    });
    pods.push(pod);
    return pod;
  };
  const ride = async (origin: string) =>
    server.query<{ n: number; charged: number; queued: number }>(
      `SELECT count(*)::int AS n, count(charge_id)::int AS charged, count(*) FILTER (WHERE receipt_queued)::int AS queued
       FROM rides WHERE origin = $1`,
      [origin],
      url,
    );

  beforeAll(async () => {
    server = await PostgresServer.start();
    url = await server.createDatabase(`phases_pods_${process.pid}`);
    provider = await FakeProvider.start();
    healthy = await start();
  }, 90_000);
  afterAll(async () => {
    await Promise.all(pods.map((p) => p.kill()));
    await provider?.stop();
    await server?.destroy();
  });

  // Where the pod dies, and how often the provider is then called with the run's key in all.
  const POINTS = [
    ['after:ride_created', 1],
    ['before-record:charge_created', 2],
    ['after:charge_created', 1],
    ['after-commit:3', 1], // the last phase committed with the response, which never left
  ] as const;

  it.each(POINTS)(
    'killed at %s: the retry resumes there; one ride, one charge, one receipt; then it replays',
    async (point, calls) => {
      const key = `killed-${point}-${process.pid}`;
      const doomed = await start({ FAULT: point });
      const keysBefore = new Set(provider.calls.keys());
      const chargesBefore = provider.charges;
      await expect(book(doomed.base, key)).rejects.toThrow(); // the connection died with the pod
      const resumed = await retryUntilSettled(healthy.base, key);
      expect(resumed.status).toBe(201);
      expect(JSON.parse(resumed.text)).toMatchObject({ chargeId: expect.stringMatching(/^ch_/), amount: 2500 });
      expect(await ride(key)).toEqual([{ n: 1, charged: 1, queued: 1 }]);
      // One new key at the provider, the run's derived one, called as often as the crash point implies.
      const newKeys = [...provider.calls.keys()].filter((k) => !keysBefore.has(k));
      expect(newKeys).toHaveLength(1);
      expect(provider.callsWith(newKeys[0])).toBe(calls);
      expect(provider.charges - chargesBefore).toBe(1);
      expect(await book(healthy.base, key)).toEqual({ ...resumed, replayed: true });
      const [{ n }] = await server.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM idempotency_records_phases WHERE key LIKE $1',
        [`%${key}`],
        url,
      );
      expect(n).toBe(0);
    },
    60_000,
  );

  it('killed with nobody coming back: the completer of another pod drives the run through its last phase; the late retry gets its response', async () => {
    const key = `abandoned-${process.pid}`;
    const doomed = await start({ FAULT: 'after:ride_created' });
    const keysBefore = new Set(provider.calls.keys());
    await expect(book(doomed.base, key)).rejects.toThrow();
    const completing = await start({ COMPLETER_INTERVAL_MS: '100', COMPLETER_IDLE_MS: '0' });
    // No request at all: the completer finds the run once the dead pod's lease has lapsed.
    for (let i = 0; i < 300 && (await ride(key))[0].queued === 0; i++) await sleep(50);
    expect(await ride(key)).toEqual([{ n: 1, charged: 1, queued: 1 }]);
    const newKeys = [...provider.calls.keys()].filter((k) => !keysBefore.has(k));
    expect(newKeys).toHaveLength(1);
    expect(provider.callsWith(newKeys[0])).toBe(1);
    await completing.kill();
    // The client, back at last: its response is rendered from the finished run, nothing runs again.
    const late = await retryUntilSettled(healthy.base, key);
    expect(late.status).toBe(201);
    expect(JSON.parse(late.text)).toMatchObject({ chargeId: expect.stringMatching(/^ch_/), amount: 2500 });
    expect(await ride(key)).toEqual([{ n: 1, charged: 1, queued: 1 }]);
    expect(provider.callsWith(newKeys[0])).toBe(1);
    expect(await book(healthy.base, key)).toEqual({ ...late, replayed: true });
  }, 60_000);
});
