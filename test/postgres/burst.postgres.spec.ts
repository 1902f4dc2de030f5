import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Body, Controller, type INestApplication, Injectable, Logger, Post } from '@nestjs/common';
import { Idempotent, IdempotencyModule, PostgresStore } from '../../lib/index.js';
import { ADAPTERS, listen, startApp } from '../support/app.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { pooled } from '../support/pod.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { sleep, until } from '../support/timing.js';

const describePg = postgresAvailable('PostgreSQL burst suite') ? describe : describe.skip;

/** Handler runs per key. */
@Injectable()
class Ledger {
  readonly runs = new Map<string, number>();
}

/**
 * The shape of the burst; BURST_* override it for a one-off measurement (the other shape:
 * BURST_KEYS=1000 BURST_POOL=4 BURST_LEASE_MS=3000 BURST_DELAY_MS=0).
 */
const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const HANDLER_MS = num('BURST_HANDLER_MS', 2_500);
const KEYS = num('BURST_KEYS', 120);
const POOL = num('BURST_POOL', 1);
const LEASE_MS = num('BURST_LEASE_MS', 1_500);
const DELAY_MS = num('BURST_DELAY_MS', 3);

@Controller('burst')
class BurstController {
  constructor(private readonly ledger: Ledger) {}

  @Post()
  @Idempotent()
  async charge(@Body() body: { key: string }): Promise<{ key: string; run: number }> {
    const run = (this.ledger.runs.get(body.key) ?? 0) + 1;
    this.ledger.runs.set(body.key, run);
    await sleep(HANDLER_MS);
    return { key: body.key, run };
  }
}

// H16 (issue 22 item 1): held claims × round trip beyond tick × pool size let leases lapse under
// running handlers, and commits starve behind duplicates' claims. PostgreSQL "in another zone"
// (3 ms each way through a proxy), a pool of one connection, a lease shorter than the handlers.
describePg.each(ADAPTERS)('a burst on a small pool of a distant PostgreSQL, on %s', (adapter) => {
  let server: PostgresServer;
  let proxy: FaultProxy;
  let app: INestApplication;
  let base: string;
  let ledger: Ledger;
  beforeAll(async () => {
    server = await PostgresServer.start();
    const url = await server.createDatabase(`burst_${adapter}_${process.pid}`);
    proxy = await FaultProxy.start(Number(new URL(url).port), DELAY_MS);
    const store = new PostgresStore({ connectionString: proxy.url(url), poolSize: POOL });
    app = await startApp(adapter, {
      imports: [IdempotencyModule.forRoot({ store: store, leaseMs: LEASE_MS })],
      controllers: [BurstController],
      providers: [Ledger],
    });
    base = await listen(app);
    ledger = app.get(Ledger);
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await proxy?.close();
    await server?.destroy();
  });

  const post = async (key: string) => {
    const res = await fetch(`${base}/burst`, {
      method: 'POST',
      headers: { 'idempotency-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ key }),
    });
    return { status: res.status, text: await res.text(), replayed: res.headers.get('idempotent-replayed') === 'true' };
  };

  it('120 handlers longer than the lease, duplicates every 200 ms: each runs once and every key commits', async () => {
    const quiet = [jest.spyOn(Logger.prototype, 'error'), jest.spyOn(Logger.prototype, 'warn')].map((s) =>
      s.mockImplementation(() => undefined),
    );
    try {
      const keys = Array.from({ length: KEYS }, (_, i) => `burst-${adapter}-${i}`);
      // A client whose attempt met a pool too busy to claim (503, nothing ran) sends it again, until a
      // deadline rather than a count: on two cores shared with another job a one-connection pool
      // serves far fewer claims a second than this burst sends, and sheds the rest with 503.
      const until = Date.now() + 150_000;
      let shed = 0;
      const persistent = async (key: string) => {
        let answer = await post(key);
        // Retry-After, shortened, and backing off as clients do: 250 ms doubling up to 2 s.
        for (let pause = 250; answer.status === 503 && Date.now() < until; pause = Math.min(2 * pause, 2_000)) {
          shed++;
          await sleep(pause);
          answer = await post(key);
        }
        return answer;
      };
      const firsts = await Promise.all(
        keys.map(async (key) => {
          const first = persistent(key);
          let done = false;
          void first.finally(() => (done = true));
          // Duplicates while the first runs: at most 20 per key, so the loop is bounded.
          for (let i = 0; i < 20 && !done; i++) {
            await sleep(200);
            if (!done) await post(key);
          }
          return first;
        }),
      );
      const doubles = keys.filter((k) => (ledger.runs.get(k) ?? 0) > 1);
      const [error] = quiet;
      const notStored = error.mock.calls.filter((c) => String(c[0]).includes('response not stored')).length;
      // What the logger said, by kind: the first thing to read when this test fails.
      const kinds = new Map<string, number>();
      for (const spy of quiet)
        for (const [message] of spy.mock.calls) {
          const kind = String(message)
            .replace(/"[^"]*"/g, '…')
            .slice(0, 60);
          kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
        }
      process.stdout.write(
        `\nburst (${adapter}, ${KEYS} keys, pool ${POOL}, lease ${LEASE_MS} ms): ran twice ${doubles.length}, not stored ${notStored}, claims shed (503) ${shed}\n` +
          [...kinds].map(([kind, n]) => `  ${n} × ${kind}\n`).join(''),
      );
      // The promise first: no handler ran twice and no finished handler's commit failed.
      expect(notStored).toBe(0);
      expect(doubles).toEqual([]);
      // One of the first attempt and its duplicates ran the handler; the first attempt got 201 or 409 then.
      expect(firsts.filter((r) => r.status !== 201 && r.status !== 409)).toEqual([]);
      // Every key committed: a retry replays, it is neither 409 (stuck claim) nor a second run.
      // Four at a time: a burst of 120 claims on one distant connection would rightly wait past the timeout (503).
      // Under load a claim may wait past the timeout (503): the client retries, as it would.
      const retries = await pooled(
        4,
        keys.map((k) => () => persistent(k)),
      );
      expect(retries.filter((r) => r.status !== 201 || !r.replayed)).toEqual([]);
      expect(retries.map((r) => r.text)).toEqual(firsts.map((r, i) => (r.status === 201 ? r.text : retries[i].text)));
      expect(retries.map((r) => JSON.parse(r.text).run)).toEqual(keys.map(() => 1));
      // H31 (item 14): no false alarms either: a renewal answered after its commit is no lease lost.
      const [, warn] = quiet;
      expect(warn.mock.calls.filter((c) => String(c[0]).includes('lease lost'))).toEqual([]);
    } finally {
      for (const spy of quiet) spy.mockRestore();
    }
  }, 240_000);

  // What failed the burst above on a machine shared with a second CI run: the path to the store stood
  // still past the lease, the renewal and the commit landed late, and both were refused because the
  // claim had expired, though nobody had taken the key (the duplicates stood still too). The owner
  // token is the fence: the late renewal keeps the key and the late commit stores the response.
  it('the path to the store stands still past the lease under a running handler: no lease lost, stored once, replayed', async () => {
    const logged = [jest.spyOn(Logger.prototype, 'error'), jest.spyOn(Logger.prototype, 'warn')].map((s) =>
      s.mockImplementation(() => undefined),
    );
    const key = `stall-${adapter}`;
    try {
      const first = post(key);
      await until(() => ledger.runs.has(key));
      proxy.stall();
      // Longer than the lease, and past the handler's end: its commit waits behind the held renewal.
      await sleep(LEASE_MS + 1_500);
      const duplicate = post(key);
      proxy.resume();
      expect((await first).status).toBe(201);
      expect([201, 409]).toContain((await duplicate).status);
      const retry = await post(key);
      expect(retry).toMatchObject({ status: 201, replayed: true, text: (await first).text });
      expect(ledger.runs.get(key)).toBe(1);
      // The renewals sent into the stall time out (logged); nothing was lost, taken over or left unstored.
      const said = logged.flatMap((spy) => spy.mock.calls.map((c) => String(c[0])));
      expect(said.filter((m) => !m.includes('lease renewal failed: Query read timeout'))).toEqual([]);
    } finally {
      proxy.resume();
      for (const spy of logged) spy.mockRestore();
    }
  }, 60_000);
});
