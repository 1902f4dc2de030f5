import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { PostgresStore } from '../../lib/index.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { until } from '../support/timing.js';
import { manyWaiters, startWaitPod, type WaitPod, waitingScenarios } from '../support/waiting.js';

const describePg = postgresAvailable('waiting duplicates on PostgreSQL') ? describe : describe.skip;

// Two applications (pods) on one database: the duplicate waits on the second, the first request runs
// on the first, and the wake-up travels through LISTEN/NOTIFY.
describePg("inFlight: 'wait' across two pods on PostgresStore", () => {
  let server: PostgresServer;
  let url: string;
  let first: WaitPod;
  let second: WaitPod;
  const named = (name: string) => {
    const named = new URL(url);
    named.searchParams.set('application_name', name);
    return new PostgresStore({ connectionString: named.toString() });
  };
  const backends = (name: string) =>
    server.query<{ query: string }>('SELECT query FROM pg_stat_activity WHERE application_name = $1', [name], url);

  beforeAll(async () => {
    server = await PostgresServer.start();
    url = await server.createDatabase(`waiting_${process.pid}`);
    first = await startWaitPod('express', named('first'));
    second = await startWaitPod('fastify', named('second'));
  });
  afterAll(async () => {
    await first?.app.close();
    await second?.app.close();
    await server?.destroy();
  });

  waitingScenarios(() => ({ first, second }));

  it('1 000 waiting duplicates cost one LISTEN connection and no pool connection; each gets the replay', async () => {
    await manyWaiters(first, second, 1_000, async () => {
      const mine = await backends('second');
      expect(mine.filter((b) => b.query.startsWith('LISTEN'))).toHaveLength(1);
      // The store's pool (4 by default) and the listener: none per waiter.
      expect(mine.length).toBeLessThanOrEqual(4 + 1);
    });
  }, 120_000);

  it('the listener comes back after its connection is killed: a later duplicate is woken again', async () => {
    await server.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'second' AND query LIKE 'LISTEN%'",
      [],
      url,
    );
    await until(async () => (await backends('second')).some((b) => b.query.startsWith('LISTEN')), 20_000);
    await manyWaiters(first, second, 1, async () => undefined);
  }, 60_000);
});
