import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { type INestApplication, Logger } from '@nestjs/common';
import request from 'supertest';
import { IdempotencyModule, PostgresStore } from '../../lib/index.js';
import { ADAPTERS, startApp } from '../support/app.js';
import { Gate, Runs, TestController } from '../support/fixtures.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { sleep } from '../support/timing.js';

const describePg = postgresAvailable('PostgreSQL outage suite') ? describe : describe.skip;

// In-process apps on a PostgreSQL server of the suite's own, which the tests stop and start again.
describePg.each(ADAPTERS)('PostgreSQL outage on %s', (adapter) => {
  let server: PostgresServer;
  let app: INestApplication;
  let runs: Runs;
  let gate: Gate;
  beforeAll(async () => {
    server = await PostgresServer.start({ ownServer: true });
    app = await startApp(adapter, {
      imports: [
        IdempotencyModule.forRoot({ store: new PostgresStore({ connectionString: server.url, statementTimeoutMs: 500 }) }),
      ],
      controllers: [TestController],
      providers: [Runs, Gate],
    });
    runs = app.get(Runs);
    gate = app.get(Gate);
  }, 60_000);
  afterAll(async () => {
    gate?.release();
    await app?.close();
    await server?.destroy();
  });

  const post = (key: string) => request(app.getHttpServer()).post('/payments').set('Idempotency-Key', key).send({ a: 1 });

  it("a commit that fails after the handler ran still sends the handler's response, and lands once the server is back", async () => {
    const warnings = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      gate.close();
      const entered = gate.whenEntered();
      const pending = post('commit-fails').then((r) => r);
      await entered;
      await server.stop();
      gate.release();
      const res = await pending;
      expect(res.status).toBe(201);
      expect(res.body.txId).toMatch(/^tx-\d+$/);
      expect(warnings).toHaveBeenCalledWith(
        expect.stringContaining('TestController.create: commit failed, retrying for a lease'),
      );
    } finally {
      await server.resume();
    }
    try {
      let retry = await post('commit-fails');
      for (let i = 0; i < 100 && retry.status !== 201; i++) {
        await sleep(100);
        retry = await post('commit-fails');
      }
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(errors).not.toHaveBeenCalledWith(expect.stringContaining('response not stored'));
    } finally {
      warnings.mockRestore();
      errors.mockRestore();
    }
  }, 30_000);

  it('claims fail closed with 503 while the server is down, and succeed once it is back', async () => {
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      expect((await post('pg-before')).status).toBe(201);
      await server.stop();
      const before = runs.total();
      const down = await post('pg-during');
      expect(down.status).toBe(503);
      expect(down.headers['retry-after']).toBe('1');
      expect(runs.total()).toBe(before);
      await server.resume();
      let back = await post('pg-during');
      for (let i = 0; i < 50 && back.status === 503; i++) {
        await sleep(100);
        back = await post('pg-during');
      }
      expect(back.status).toBe(201);
      expect((await post('pg-during')).headers['idempotent-replayed']).toBe('true');
    } finally {
      errors.mockRestore();
    }
  }, 30_000);
});
