import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { built } from '../support/build.js';
import { MySqlServer, mysqlAvailable } from '../support/mysql-server.js';
import { charge, retryUntilSettled } from '../support/ledger-client.js';
import { ledgerScenarios } from '../support/ledger-scenarios.js';
import { pay, Pod, type PodOptions } from '../support/pod.js';
import { sleep } from '../support/timing.js';

built('.build');

const describeMy = mysqlAvailable('ledger pods suite on MySQL') ? describe : describe.skip;

// The ledger sample on MySQL (TypeORM's mysql driver, @nestjs-cls/transactional, MySqlStore and
// @Idempotent({ transactional: true })) in processes of their own, on a MariaDB server of the
// suite's own: it is stopped and started again. Pods alternate between Express and Fastify.

let server: MySqlServer;
let databases = 0;

describeMy('the ledger sample: exactly-once with MySQL across processes', () => {
  let url: string;
  const pods: Pod[] = [];
  const start = async (over: Partial<PodOptions> = {}): Promise<Pod> => {
    const pod = await Pod.start({ sample: 'ledger', store: 'mysql', mysqlUrl: url, ...over });
    pods.push(pod);
    return pod;
  };
  const rows = async (key: string): Promise<number> =>
    Number((await server.query<{ n: number }>('SELECT count(*) AS n FROM charges WHERE idempotency_key = ?', [key], url))[0].n);
  /** Until the handler has written its (uncommitted) charge: its transaction has modified a row. */
  const untilInserted = async (): Promise<void> => {
    for (let i = 0; i < 100; i++) {
      const [{ n }] = await server.query<{ n: number }>(
        'SELECT count(*) AS n FROM information_schema.INNODB_TRX WHERE trx_rows_modified > 0',
        [],
        url,
      );
      if (Number(n) > 0) return;
      // Not faster: looking every 25 ms (a new connection each time) kept the handler's INSERT from showing at all (not traced).
      await sleep(200);
    }
    throw new Error('the handler never wrote its charge');
  };

  beforeAll(async () => {
    server = await MySqlServer.start({ ownServer: true });
  }, 120_000);
  beforeEach(async () => {
    url = await server.createDatabase(`ledger_${process.pid}_${++databases}`);
  });
  afterEach(async () => {
    await Promise.all(pods.splice(0).map((p) => p.kill()));
  });
  afterAll(async () => {
    await server?.destroy();
  });

  ledgerScenarios({
    name: 'MariaDB',
    start,
    rows,
    chargeId: async (key) =>
      (await server.query<{ id: number }>('SELECT id FROM charges WHERE idempotency_key = ?', [key], url))[0].id,
    untilInserted,
    stopServer: () => server.stop(),
    resumeServer: () => server.resume(),
  });

  it("the transaction's connection killed mid-handler: 5xx, the key freed or kept to its lease, then exactly one charge", async () => {
    const pod = await start({ providerLatencyMs: 1000, env: { TRANSACTION_TIMEOUT_MS: '2000' } });
    const during = charge(pod.base, 'killed-connection');
    await untilInserted();
    const [trx] = await server.query<{ id: number }>(
      'SELECT trx_mysql_thread_id AS id FROM information_schema.INNODB_TRX WHERE trx_rows_modified > 0',
      [],
      url,
    );
    await server.query(`KILL ${Number(trx.id)}`);
    expect((await during).status).toBeGreaterThanOrEqual(500);
    expect(await rows('killed-connection')).toBe(0);
    const after = await retryUntilSettled(pod.base, 'killed-connection');
    expect(after).toMatchObject({ status: 201, replayed: false });
    expect(await rows('killed-connection')).toBe(1);
  }, 90_000);

  it('the payments sample runs on it too (STORE=mysql): one payment, a byte-identical replay', async () => {
    const pod = await Pod.start({ store: 'mysql', mysqlUrl: url, adapter: 'fastify' });
    pods.push(pod);
    const first = await pay(pod.base, 'payments-on-mysql');
    expect(first).toMatchObject({ status: 201, replayed: false });
    expect(await pay(pod.base, 'payments-on-mysql')).toEqual({ ...first, replayed: true });
    expect(pod.output.join('')).toContain('idempotency store: mysql');
  }, 90_000);
});
