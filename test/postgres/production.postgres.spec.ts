import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { IdempotencyModule, PostgresStore } from '../../lib/index.js';
import { ADAPTERS, useApps } from '../support/app.js';
import { DurableController, sha256 } from '../support/durable.js';
import { Gate, Runs } from '../support/fixtures.js';
import { spyOnLogger } from '../support/logger.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { sleep, until } from '../support/timing.js';

const describePg = postgresAvailable('PostgreSQL production suite') ? describe : describe.skip;

describePg('PostgresStore on production days', () => {
  let server: PostgresServer;
  let databases = 0;
  const database = () => server.createDatabase(`prod_${process.pid}_${++databases}`);
  beforeAll(async () => {
    server = await PostgresServer.start({ ownServer: true });
  }, 60_000);
  afterAll(async () => {
    await server?.destroy();
  });

  describe.each(ADAPTERS)('on %s', (adapter) => {
    const start = useApps();
    const logs = spyOnLogger();
    const app = async (url: string, options: { maxResponseBytes?: number } = {}) =>
      start(adapter, {
        imports: [IdempotencyModule.forRoot({ store: new PostgresStore({ connectionString: url }), ...options })],
        controllers: [DurableController],
        providers: [Runs, Gate],
      });

    // H17 (issue 22 item 2): with the default statementTimeoutMs a stored 20 MB record answered 503 to
    // every retry (its read took longer than the timeout), and a 40 MB one failed to commit and ran again.
    it('replays a 20 MB response byte for byte with the default statement timeout; over maxResponseBytes is response-too-large', async () => {
      const a = await app(await database(), { maxResponseBytes: 32 * 1024 * 1024 });
      const post = (key: string, mb: number) =>
        request(a.getHttpServer()).post('/durable/big').set('Idempotency-Key', key).send({ mb });
      const first = await post('big-20', 20);
      expect(first.status).toBe(201);
      const retry = await post('big-20', 20);
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(sha256(retry.text)).toBe(sha256(first.text));
      const over = await post('big-40', 40);
      expect(over.status).toBe(201);
      const refused = await post('big-40', 40);
      expect(refused.headers['idempotent-replayed']).toBe('true');
      expect(refused.body.error).toContain('its response was over 33554432 bytes and was not kept');
      expect(a.get(Runs).of('big')).toBe(2);
    }, 120_000);

    // H20 (item 5): PostgreSQL restarted while handlers finished: the commit was tried once, the lease
    // dropped, and a retry after it ran the handler again although its client already held a 200.
    it('a commit during a restart is retried until the server is back: the retry replays, never a second run', async () => {
      const a = await app(await database());
      const server_ = a.getHttpServer();
      const gate = a.get(Gate);
      const { answer } = await gate.hold(() => request(server_).post('/durable/held').set('Idempotency-Key', 'restart'));
      await server.stop();
      try {
        gate.release();
        const first = await answer;
        expect(first.status).toBe(201);
        await until(
          () => logs.warnings.mock.calls.some((c: unknown[]) => String(c[0]).includes('commit failed, retrying')),
          10_000,
        );
      } finally {
        await server.resume();
      }
      let retry = await request(server_).post('/durable/held').set('Idempotency-Key', 'restart');
      for (let i = 0; i < 100 && retry.status !== 201; i++) {
        await sleep(100);
        retry = await request(server_).post('/durable/held').set('Idempotency-Key', 'restart');
      }
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(a.get(Runs).of('held')).toBe(1);
      expect(logs.errors).not.toHaveBeenCalledWith(expect.stringContaining('response not stored'));
    }, 60_000);
  });

  // H22 (item 7): createSchema: false with no table, no primary key, or `record text` started fine
  // and answered 503 to every request (or to every retry).
  const t = '"public"."idempotency_records"';
  it.each([
    ['no table', '', 'the table does not exist'],
    [
      'no primary key on key',
      `CREATE TABLE ${t} (key text, fingerprint text NOT NULL, state smallint NOT NULL, owner text, expires_at timestamptz NOT NULL, record bytea)`,
      'column key is not its primary key',
    ],
    [
      'record text',
      `CREATE TABLE ${t} (key text PRIMARY KEY, fingerprint text NOT NULL, state smallint NOT NULL, owner text, expires_at timestamptz NOT NULL, record text)`,
      'column record is text, not bytea',
    ],
  ])('%s: open() fails naming what differs', async (_, ddl, problem) => {
    const url = await database();
    if (ddl) await server.query(ddl, [], url);
    const store = new PostgresStore({ connectionString: url, createSchema: false });
    await expect(store.open()).rejects.toThrow(
      `PostgresStore: table "public"."idempotency_records" is not what this release needs: ${problem}`,
    );
    await store.close();
  });

  it('names the missing claim function, and ping() (the health check) fails once the table is gone', async () => {
    const url = await database();
    const store = new PostgresStore({ connectionString: url });
    await store.open();
    await store.ping();
    await server.query('DROP FUNCTION "public"."idempotency_records_claim2"', [], url);
    await expect(store.ping()).rejects.toThrow('the claim function "public"."idempotency_records_claim2" is missing');
    await server.query(`DROP TABLE ${t}`, [], url);
    await expect(store.ping()).rejects.toThrow('the table does not exist');
    await store.close();
  });

  // H24 (item 8): a 63-character tableName lost its expires_at index (the name was cut back to the
  // table's own, and IF NOT EXISTS skipped it).
  it('the longest legal tableName gets its sweep index and claim function under names of their own', async () => {
    const url = await database();
    const tableName = 'a'.repeat(63);
    const store = new PostgresStore({ connectionString: url, tableName });
    await store.open();
    const indexes = await server.query<{ indexname: string }>(
      'SELECT indexname FROM pg_indexes WHERE tablename = $1 ORDER BY indexname',
      [tableName],
      url,
    );
    expect(indexes.map((i) => i.indexname)).toEqual([
      expect.stringMatching(/^a{43}_[0-9a-f]{8}_expires_at$/),
      `${'a'.repeat(58)}_pkey`,
    ]);
    expect(await store.claim('k', { owner: 'o', fingerprint: 'f', leaseMs: 1000 })).toEqual({ state: 'claimed' });
    expect(
      await store.renewAll(
        [
          { key: 'k', owner: 'o' },
          { key: 'k', owner: 'x' },
        ],
        1000,
      ),
    ).toEqual([true, false]);
    await store.close();
  });
});
