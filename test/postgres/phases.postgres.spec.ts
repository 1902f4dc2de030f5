import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import {
  Body,
  type CallHandler,
  Controller,
  type ExecutionContext,
  HttpException,
  Inject,
  type INestApplication,
  Injectable,
  type NestInterceptor,
  Post,
  ServiceUnavailableException,
  StreamableFile,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { map, type Observable } from 'rxjs';
import {
  type IdempotencyEvent,
  type IdempotencyModuleOptions,
  IdempotencyCompleter,
  IdempotencyHealthIndicator,
  IdempotencyModule,
  Idempotent,
  InMemoryStore,
  PhasedRun,
  PhasedWorkflow,
  Phases,
  PostgresStore,
} from '../../lib/index.js';
import { ADAPTERS, type AdapterName, listen, useApps } from '../support/app.js';
import { FakeProvider, type ProviderCharge } from '../support/fake-provider.js';
import { spyOnLogger } from '../support/logger.js';
import { PgTransactions } from '../support/pg-transactions.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { sleep, until } from '../support/timing.js';
import { sampleRecord } from '../support/store-contract.js';

const describePg = postgresAvailable('atomic phases PostgreSQL suite') ? describe : describe.skip;

let server: PostgresServer;
let pool: pg.Pool;
let provider: FakeProvider;

interface RideBody {
  rider: string;
  amount: number;
}

/** What the next runs do at each step; reset before each test. */
const hooks: {
  afterRide?: () => Promise<void> | void;
  beforeRecord?: (sql: { query(text: string, values: unknown[]): Promise<unknown[]> }) => Promise<void> | void;
  inFinish?: () => void;
} = {};
/** What each run was handed: the phases done before it, the foreign key. */
const runs: { done: readonly string[]; key?: string }[] = [];

/** Holds the next run after its first phase: `inside` once it is there, `release()` lets it go on. */
function holdAfterRide(): { inside: Promise<void>; release: () => void } {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let entered!: () => void;
  const inside = new Promise<void>((r) => (entered = r));
  hooks.afterRide = () => {
    delete hooks.afterRide; // once: the runs after it go on
    entered();
    return gate;
  };
  return { inside, release };
}

/** The provider call of the phase, as an application makes it: a 402 ends the run, any other failure is retryable. */
async function chargeCard(amount: number, key: string): Promise<ProviderCharge> {
  const res = await fetch(`${provider.url}/charges`, {
    method: 'POST',
    headers: { 'idempotency-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ amount }),
  });
  if (res.status === 402) throw new HttpException({ error: 'card declined' }, 402);
  if (!res.ok) throw new ServiceUnavailableException('payment provider unavailable');
  return (await res.json()) as ProviderCharge;
}

/** The ride's phases as a resumable workflow: what a completer runs again with the stored input. */
@Injectable()
class RideBooking {
  @PhasedWorkflow('book-ride')
  async book(run: PhasedRun, body: RideBody): Promise<object> {
    const seen: { done: readonly string[]; key?: string } = { done: run.done };
    runs.push(seen);
    const ride = await run.phase('ride_created', async (sql) => {
      const [row] = (await sql.query('INSERT INTO rides (rider, amount) VALUES ($1, $2) RETURNING id', [
        body.rider,
        body.amount,
      ])) as { id: number }[];
      return { id: row.id, at: new Date(0) };
    });
    await hooks.afterRide?.();
    const chargeId = await run.foreign(
      'charge_created',
      (key) => {
        seen.key = key;
        return chargeCard(body.amount, key);
      },
      async (sql, charge) => {
        await hooks.beforeRecord?.(sql);
        await sql.query('UPDATE rides SET charge_id = $1 WHERE id = $2', [charge.id, ride.id]);
        return charge.id;
      },
    );
    return run.finish(async (sql) => {
      hooks.inFinish?.();
      await sql.query('INSERT INTO receipts (ride_id) VALUES ($1)', [ride.id]);
      // A Date became its JSON string in the recovery point, the same on a fresh run and a resumed one.
      return { ride: ride.id, charge: chargeId, at: ride.at };
    });
  }
}

@Controller('rides')
class RidesController {
  constructor(@Inject(RideBooking) private readonly booking: RideBooking) {}

  @Post()
  @Idempotent({ atomicPhases: true })
  book(@Body() body: RideBody, @Phases() run: PhasedRun): Promise<object> {
    return this.booking.book(run, { rider: body.rider, amount: body.amount });
  }

  @Post('stream')
  @Idempotent({ atomicPhases: true })
  async stream(@Body() body: RideBody, @Phases() run: PhasedRun): Promise<StreamableFile> {
    runs.push({ done: run.done });
    await run.phase('ride_created', async (sql) => {
      await sql.query('INSERT INTO rides (rider, amount) VALUES ($1, $2)', [body.rider, body.amount]);
    });
    return new StreamableFile(Buffer.from('receipt'));
  }

  @Post('plain')
  @Idempotent()
  plain(@Phases() run: PhasedRun): object {
    return { done: run.done };
  }
}

/** The phases `OddBooking` runs, in order: a test reorders them as a deploy would. */
let oddPhases = ['first', 'second'];
/** What `OddBooking` ran, by phase. */
const oddRan: string[] = [];
/** Fails the next odd run once after its first phase (retryable: the key is freed, the point kept). */
const oddHooks: { afterFirst?: true } = {};

/** Results jsonb cannot hold as they are: a NUL, a lone surrogate, keys in an order jsonb changes. */
@Injectable()
class OddBooking {
  @PhasedWorkflow('odd')
  async book(run: PhasedRun, body: { text: string }): Promise<object> {
    const results: Record<string, unknown> = {};
    for (const phase of oddPhases) {
      results[phase] = await run.phase(phase, () => {
        oddRan.push(phase);
        return { zebra: `${body.text}\u0000${phase}`, lone: '\ud800', a: { yy: 1, b: 2 } };
      });
      if (phase === oddPhases[0] && oddHooks.afterFirst) {
        delete oddHooks.afterFirst;
        throw new Error('retryable, after the first phase');
      }
    }
    return run.finish(() => ({ zz: body, results, a: 1 }));
  }
}

@Controller('odd')
class OddController {
  constructor(@Inject(OddBooking) private readonly booking: OddBooking) {}

  @Post()
  @Idempotent({ atomicPhases: true })
  book(@Body() body: { text: string }, @Phases() run: PhasedRun): Promise<object> {
    return this.booking.book(run, body);
  }
}

/** Wraps every body, as a global interceptor does: the record is what goes out, so finish() waits for it. */
@Injectable()
class EnvelopeInterceptor implements NestInterceptor {
  intercept(_: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(map((data: unknown) => ({ data })));
  }
}

interface Reply {
  status: number;
  text: string;
  replayed: boolean;
}

async function book(base: string, key: string, body: RideBody): Promise<Reply> {
  const res = await fetch(`${base}/rides`, {
    method: 'POST',
    headers: { 'idempotency-key': key, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text(), replayed: res.headers.get('idempotent-replayed') === 'true' };
}

const count = async (text: string, values: unknown[]): Promise<number> =>
  (await pool.query<{ n: number }>(text, values)).rows[0].n;
const ridesOf = (rider: string) => count('SELECT count(*)::int AS n FROM rides WHERE rider = $1', [rider]);
const receiptsOf = (rider: string) =>
  count('SELECT count(*)::int AS n FROM receipts r JOIN rides d ON d.id = r.ride_id WHERE d.rider = $1', [rider]);
const pointsOf = (key: string) =>
  count('SELECT count(*)::int AS n FROM idempotency_records_phases WHERE key LIKE $1', [`%:${key}`]);

describePg('@Idempotent({ atomicPhases: true }) on PostgreSQL: recovery points', () => {
  const start = useApps();
  const logs = spyOnLogger();

  beforeAll(async () => {
    server = await PostgresServer.start();
    pool = new pg.Pool({ connectionString: await server.createDatabase(`phases_${process.pid}`), max: 10 });
    pool.on('error', () => undefined);
    await pool.query(`CREATE TABLE rides (id serial PRIMARY KEY, rider text NOT NULL, amount integer NOT NULL, charge_id text);
      CREATE TABLE receipts (id serial PRIMARY KEY, ride_id integer NOT NULL UNIQUE REFERENCES rides (id))`);
    provider = await FakeProvider.start();
  }, 60_000);
  afterAll(async () => {
    await provider?.stop();
    await pool?.end();
    await server?.destroy();
  });
  beforeEach(() => {
    delete hooks.afterRide;
    delete hooks.beforeRecord;
    delete hooks.inFinish;
    runs.length = 0;
    provider.failing = 0;
  });

  async function app(
    adapter: AdapterName,
    options: IdempotencyModuleOptions = {},
  ): Promise<{ base: string; tx: PgTransactions; nest: INestApplication }> {
    const tx = new PgTransactions(pool);
    const nest = await start(adapter, {
      imports: [
        IdempotencyModule.forRoot({ store: new PostgresStore({ pool, sweepIntervalMs: 0 }), transactions: tx, ...options }),
      ],
      controllers: [RidesController],
      providers: [RideBooking, { provide: APP_INTERCEPTOR, useClass: EnvelopeInterceptor }],
    });
    return { base: await listen(nest), tx, nest };
  }

  describe.each(ADAPTERS)('%s', (adapter) => {
    const name = (what: string) => `${adapter}-${what}`;

    it('runs each phase once; a retry replays the response byte for byte; the provider saw one call, with the derived key', async () => {
      const events: IdempotencyEvent[] = [];
      const { base } = await app(adapter, { events: (e) => void events.push(e) });
      const rider = name('once');
      const first = await book(base, rider, { rider, amount: 100 });
      expect(first.status).toBe(201);
      expect(events.map((e) => [e.outcome, e.status])).toEqual([['executed', 201]]);
      expect(JSON.parse(first.text)).toEqual({
        data: { ride: expect.any(Number), charge: expect.stringMatching(/^ch_/), at: new Date(0).toJSON() },
      });
      const again = await book(base, rider, { rider, amount: 100 });
      expect(again).toEqual({ status: 201, text: first.text, replayed: true });
      expect(events.map((e) => e.outcome)).toEqual(['executed', 'replayed']);
      expect(runs).toHaveLength(1);
      const derived = runs[0].key!;
      expect(derived).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(derived).not.toContain(rider);
      expect(provider.callsWith(derived)).toBe(1);
      expect(await ridesOf(rider)).toBe(1);
      expect(await receiptsOf(rider)).toBe(1);
      expect(await pointsOf(rider)).toBe(0); // deleted with the record's commit
    });

    it('a retryable failure frees the key and keeps the recovery point: the retry resumes with the results before it', async () => {
      const { base } = await app(adapter);
      const rider = name('resume');
      provider.failing = 1;
      const failed = await book(base, rider, { rider, amount: 100 });
      expect(failed.status).toBe(503);
      expect(await pointsOf(rider)).toBe(1);
      const resumed = await book(base, rider, { rider, amount: 100 });
      expect(resumed.status).toBe(201);
      expect(runs.map((r) => r.done)).toEqual([[], ['ride_created']]);
      // The same derived key both times: the provider charged once.
      expect(runs[1].key).toBe(runs[0].key);
      expect(provider.callsWith(runs[0].key!)).toBe(2);
      expect(await ridesOf(rider)).toBe(1);
      expect(await receiptsOf(rider)).toBe(1);
      expect(JSON.parse(resumed.text).data.ride).toBe(
        (await pool.query<{ id: number }>('SELECT id FROM rides WHERE rider = $1', [rider])).rows[0].id,
      );
    });

    it("an error between phases is the filters' 500, not a 503: the key is freed, the recovery point kept, the retry resumes", async () => {
      const { base } = await app(adapter);
      const rider = name('between');
      hooks.afterRide = () => {
        delete hooks.afterRide;
        throw new Error('the handler broke between its phases');
      };
      const failed = await book(base, rider, { rider, amount: 100 });
      expect(failed.status).toBe(500);
      expect(failed.text).not.toContain('broke');
      expect(await pointsOf(rider)).toBe(1);
      const resumed = await book(base, rider, { rider, amount: 100 });
      expect(resumed.status).toBe(201);
      expect(runs.map((r) => r.done)).toEqual([[], ['ride_created']]);
      expect(await ridesOf(rider)).toBe(1);
    });

    it('a 4xx thrown inside a phase ends the run: its response is stored and replayed, the provider is not called again', async () => {
      const { base } = await app(adapter);
      const rider = name('declined');
      const declined = await book(base, rider, { rider, amount: 402 });
      expect(declined.status).toBe(402);
      expect(JSON.parse(declined.text)).toEqual({ error: 'card declined' });
      const again = await book(base, rider, { rider, amount: 402 });
      expect(again).toEqual({ status: 402, text: declined.text, replayed: true });
      expect(runs).toHaveLength(1);
      expect(provider.callsWith(runs[0].key!)).toBe(1);
      expect(await ridesOf(rider)).toBe(1); // the phase before it stays committed
      expect(await receiptsOf(rider)).toBe(0);
      expect(await pointsOf(rider)).toBe(0);
    });

    it('a concurrent duplicate gets 409 while the run is between phases', async () => {
      const { base } = await app(adapter);
      const rider = name('conflict');
      const { inside, release } = holdAfterRide();
      const first = book(base, rider, { rider, amount: 100 });
      await inside;
      const duplicate = await book(base, rider, { rider, amount: 100 });
      expect(duplicate.status).toBe(409);
      release();
      expect((await first).status).toBe(201);
      expect(runs).toHaveLength(1);
    });

    it('a retry with another request under a key whose run is unfinished is refused (422), and the run resumes for its own', async () => {
      const { base } = await app(adapter);
      const rider = name('reused');
      provider.failing = 1;
      expect((await book(base, rider, { rider, amount: 100 })).status).toBe(503);
      const other = await book(base, rider, { rider, amount: 999 });
      expect(other.status).toBe(422);
      expect(await pointsOf(rider)).toBe(1);
      expect((await book(base, rider, { rider, amount: 100 })).status).toBe(201);
      expect(await ridesOf(rider)).toBe(1);
    });

    it("a phase's transaction that loses a serialization conflict answers 503; the retry resumes there", async () => {
      const { base } = await app(adapter);
      const rider = name('serialization');
      hooks.beforeRecord = async (sql) => {
        delete hooks.beforeRecord;
        await sql.query(`DO $$ BEGIN RAISE EXCEPTION 'could not serialize access' USING ERRCODE = '40001'; END $$`, []);
      };
      const lost = await book(base, rider, { rider, amount: 100 });
      expect(lost.status).toBe(503);
      expect(JSON.parse(lost.text)).toEqual({ error: 'the request could not be committed; retry shortly with the same key' });
      expect((await book(base, rider, { rider, amount: 100 })).status).toBe(201);
      expect(runs.map((r) => r.done)).toEqual([[], ['ride_created']]);
      expect(await pointsOf(rider)).toBe(0);
      // Called again with the same key after the lost write: the provider answered its first charge.
      expect(runs[1].key).toBe(runs[0].key);
      expect(provider.callsWith(runs[0].key!)).toBe(2);
    });

    it("finish()'s COMMIT fails with its outcome unknown: 503 instead of the response, and after the lease the retry finishes", async () => {
      const events: IdempotencyEvent[] = [];
      const { base, tx } = await app(adapter, { leaseMs: 500, events: (e) => void events.push(e) });
      const rider = name('finish-fails');
      hooks.inFinish = () => {
        delete hooks.inFinish;
        tx.beforeCommit = () => {
          throw new Error('connection lost during COMMIT');
        };
      };
      const failed = await book(base, rider, { rider, amount: 100 });
      expect(failed.status).toBe(503);
      expect(JSON.parse(failed.text)).toEqual({ error: 'the request could not be committed; retry shortly with the same key' });
      // The COMMIT may have landed: the key is kept (not released) until its lease ends.
      expect(events.map((e) => e.outcome)).toEqual(['not-stored']);
      expect(await receiptsOf(rider)).toBe(0);
      let retry = await book(base, rider, { rider, amount: 100 });
      for (let i = 0; i < 100 && retry.status === 409; i++) {
        await sleep(50);
        retry = await book(base, rider, { rider, amount: 100 });
      }
      expect(retry.status).toBe(201);
      expect(runs.map((r) => r.done)).toEqual([[], ['ride_created', 'charge_created']]);
      expect(await ridesOf(rider)).toBe(1);
      expect(await receiptsOf(rider)).toBe(1);
      expect(provider.callsWith(runs[0].key!)).toBe(1);
    });

    it('the completer drives an abandoned run through its last phase with no client; the retry renders the response from it', async () => {
      const { base, nest } = await app(adapter, { completer: { intervalMs: 0, idleMs: 0 } });
      const completer = nest.get(IdempotencyCompleter);
      const rider = name('completed');
      provider.failing = 1;
      expect((await book(base, rider, { rider, amount: 100 })).status).toBe(503);
      expect(await completer.completeAbandoned()).toBe(1);
      // Charged and receipted by the completer: the provider called again with the run's key.
      expect(runs.map((r) => r.done)).toEqual([[], ['ride_created']]);
      expect(provider.callsWith(runs[0].key!)).toBe(2);
      expect(await receiptsOf(rider)).toBe(1);
      expect(await completer.completeAbandoned()).toBe(0); // finished runs are not taken again
      const answered = await book(base, rider, { rider, amount: 100 });
      expect(answered.status).toBe(201);
      expect(answered.replayed).toBe(false);
      expect(JSON.parse(answered.text).data).toMatchObject({ charge: expect.stringMatching(/^ch_/), at: new Date(0).toJSON() });
      expect(runs.at(-1)!.done).toEqual(['ride_created', 'charge_created']);
      expect(await receiptsOf(rider)).toBe(1);
      expect(await ridesOf(rider)).toBe(1);
      expect(provider.callsWith(runs[0].key!)).toBe(2);
      expect(await pointsOf(rider)).toBe(0);
      expect(await book(base, rider, { rider, amount: 100 })).toEqual({ ...answered, replayed: true });
    });

    // Issue 44 item 14: a 402 after phase 1 with the client gone: the provider was called 15 times in 8 s.
    it('a run the completer finds ended by a 4xx (a declined card) is ended for good: stored as its response, the provider never called again', async () => {
      const { base, nest } = await app(adapter, { completer: { intervalMs: 0, idleMs: 0 } });
      const completer = nest.get(IdempotencyCompleter);
      const rider = name('declined-later');
      provider.failing = 1;
      expect((await book(base, rider, { rider, amount: 402 })).status).toBe(503);
      expect(await completer.completeAbandoned()).toBe(1);
      const key = runs[0].key!;
      expect(provider.callsWith(key)).toBe(2);
      for (let i = 0; i < 3; i++) expect(await completer.completeAbandoned()).toBe(0);
      expect(provider.callsWith(key)).toBe(2);
      expect(await pointsOf(rider)).toBe(0);
      // The client's retry gets the decline, as if its own run had met it; nothing runs again.
      const retry = await book(base, rider, { rider, amount: 402 });
      expect(retry).toMatchObject({ status: 402, replayed: true });
      expect(JSON.parse(retry.text)).toEqual({ error: 'card declined' });
      expect(await ridesOf(rider)).toBe(1);
      expect(provider.callsWith(key)).toBe(2);
    });

    it('the completer and a client never run a run at once: whoever claims the key first runs it, the other waits its turn', async () => {
      const { base, nest } = await app(adapter, { completer: { intervalMs: 0, idleMs: 0 } });
      const completer = nest.get(IdempotencyCompleter);
      const rider = name('no-race');
      provider.failing = 1;
      expect((await book(base, rider, { rider, amount: 100 })).status).toBe(503);
      // A client holds the key: the run is not abandoned.
      const { inside, release } = holdAfterRide();
      const client = book(base, rider, { rider, amount: 100 });
      await inside;
      expect(await completer.completeAbandoned()).toBe(0);
      release();
      expect((await client).status).toBe(201);
      // Now the completer holds a run's key: the client's request is a 409 meanwhile.
      const other = name('no-race-2');
      provider.failing = 1;
      delete hooks.afterRide;
      expect((await book(base, other, { rider: other, amount: 100 })).status).toBe(503);
      const { inside: completerInside, release: resume } = holdAfterRide();
      const completing = completer.completeAbandoned();
      await completerInside;
      expect((await book(base, other, { rider: other, amount: 100 })).status).toBe(409);
      resume();
      expect(await completing).toBe(1);
      delete hooks.afterRide;
      expect((await book(base, other, { rider: other, amount: 100 })).status).toBe(201);
      expect(await receiptsOf(other)).toBe(1);
      expect(await ridesOf(other)).toBe(1);
    });

    it('the completer leaves a run of a workflow it does not know, and says so; it is looked at again only after idleMs', async () => {
      const { nest } = await app(adapter, { completer: { intervalMs: 0, idleMs: 60_000 } });
      const completer = nest.get(IdempotencyCompleter);
      const key = `idem::${name('unknown-flow')}`;
      await pool.query(
        `INSERT INTO idempotency_records_phases (key, fingerprint, results, workflow, input, updated_at, expires_at)
         VALUES ($1, 'fp', '{"a": 1}', 'unknown-flow', 'null', now() - interval '2 minutes', now() + interval '1 hour')`,
        [key],
      );
      expect(await completer.completeAbandoned()).toBe(0);
      expect(logs.warnings.mock.calls.map((c: unknown[]) => String(c[0]))).toContain(
        "an abandoned run of unknown-flow waits: no @PhasedWorkflow('unknown-flow') here",
      );
      logs.warnings.mockClear();
      expect(await completer.completeAbandoned()).toBe(0); // touched by the first look: idle again for a minute
      expect(logs.warnings).not.toHaveBeenCalled();
      await pool.query('DELETE FROM idempotency_records_phases WHERE key = $1', [key]);
    });

    it('the completer looks by itself every intervalMs', async () => {
      const { base } = await app(adapter, { completer: { intervalMs: 50, idleMs: 0 } });
      const rider = name('interval');
      provider.failing = 1;
      expect((await book(base, rider, { rider, amount: 100 })).status).toBe(503);
      for (let i = 0; i < 200 && (await receiptsOf(rider)) === 0; i++) await sleep(50);
      expect(await receiptsOf(rider)).toBe(1);
    });

    it('a run whose claim another request took over is fenced out: its next phase rolls back and it answers 409; the other finishes', async () => {
      const { base } = await app(adapter);
      const rider = name('taken-over');
      const { inside, release } = holdAfterRide();
      const first = book(base, rider, { rider, amount: 100 });
      await inside;
      // Its lease lapses (a stop-the-world pause): the retry takes the key over and resumes the run.
      await pool.query(`UPDATE idempotency_records SET expires_at = now() - interval '1 second' WHERE key LIKE $1`, [
        `%:${rider}`,
      ]);
      const second = await book(base, rider, { rider, amount: 100 });
      expect(second.status).toBe(201);
      release();
      const late = await first;
      expect(late.status).toBe(409);
      expect(runs.map((r) => r.done)).toEqual([[], ['ride_created']]);
      expect(await ridesOf(rider)).toBe(1);
      expect(await receiptsOf(rider)).toBe(1);
      // Both called out with the one derived key; the provider charged once.
      expect(runs[0].key).toBe(runs[1].key);
      expect(provider.callsWith(runs[1].key!)).toBe(2);
      expect(await book(base, rider, { rider, amount: 100 })).toEqual({ ...second, replayed: true });
    });

    it('a phased route that returns a stream gives its key up: the phases stay committed and the retry resumes after them', async () => {
      const events: IdempotencyEvent[] = [];
      const { base } = await app(adapter, { events: (e) => void events.push(e) });
      const rider = name('stream');
      const send = () =>
        fetch(`${base}/rides/stream`, {
          method: 'POST',
          headers: { 'idempotency-key': rider, 'content-type': 'application/json' },
          body: JSON.stringify({ rider, amount: 100 }),
        });
      // The envelope interceptor sends it as JSON, but the handler's value was a stream: never stored.
      expect((await send()).status).toBe(201);
      expect(await pointsOf(rider)).toBe(1);
      // Given up as the stream went out: its release may still be on its way.
      await until(() => events.length > 0);
      expect(events.map((e) => e.outcome)).toEqual(['not-stored']);
      const again = await send();
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBeNull();
      expect(runs.map((r) => r.done)).toEqual([[], ['ride_created']]);
      expect(await ridesOf(rider)).toBe(1);
    });

    it('@Phases() on a route without atomicPhases is a 500 (a programming error), its reason not sent', async () => {
      const { base } = await app(adapter);
      const res = await fetch(`${base}/rides/plain`, { method: 'POST', headers: { 'idempotency-key': name('plain') } });
      expect(res.status).toBe(500);
      expect(await res.text()).not.toContain('atomicPhases');
      // The reason goes to the log instead.
      const logged = logs.errors.mock.calls.flat().map((arg: unknown) => (arg instanceof Error ? arg.message : String(arg)));
      expect(logged.join('\n')).toContain('@Phases() is given only to handlers of @Idempotent({ atomicPhases: true }) routes');
    });
  });

  describe('results jsonb cannot hold as they are (issue 44 item 15)', () => {
    const odd = async (base: string, key: string, text: string): Promise<Reply> => {
      const res = await fetch(`${base}/odd`, {
        method: 'POST',
        headers: { 'idempotency-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ text }),
      });
      return { status: res.status, text: await res.text(), replayed: res.headers.get('idempotent-replayed') === 'true' };
    };
    const oddApp = async (options: IdempotencyModuleOptions = {}) => {
      const nest = await start('express', {
        imports: [
          IdempotencyModule.forRoot({
            store: new PostgresStore({ pool, sweepIntervalMs: 0 }),
            transactions: new PgTransactions(pool),
            ...options,
          }),
        ],
        controllers: [OddController],
        providers: [OddBooking],
      });
      return { base: await listen(nest), nest };
    };
    beforeEach(() => {
      oddPhases = ['first', 'second'];
      oddRan.length = 0;
      delete oddHooks.afterFirst;
    });

    it('a NUL, a lone surrogate and key order: a resumed run answers the bytes a fresh one does; the input too', async () => {
      const { base } = await oddApp();
      const text = 'in\u0000put \ud800';
      const fresh = await odd(base, 'odd-fresh', text);
      expect(fresh.status).toBe(201);
      oddHooks.afterFirst = true;
      expect((await odd(base, 'odd-resumed', text)).status).toBe(500);
      const resumed = await odd(base, 'odd-resumed', text);
      expect(resumed.status).toBe(201);
      expect(resumed.text).toBe(fresh.text);
      expect(oddRan).toEqual(['first', 'second', 'first', 'second']); // the resumed run ran 'first' once
      expect(JSON.parse(resumed.text)).toEqual({
        zz: { text },
        results: {
          first: { zebra: `${text}\u0000first`, lone: '\ud800', a: { yy: 1, b: 2 } },
          second: { zebra: `${text}\u0000second`, lone: '\ud800', a: { yy: 1, b: 2 } },
        },
        a: 1,
      });
    });

    it("the completer finishes the run: the response has the bytes of a fresh run, not jsonb's key order", async () => {
      const { base, nest } = await oddApp({ completer: { intervalMs: 0, idleMs: 0 } });
      const text = 'completed\u0000';
      const fresh = await odd(base, 'odd-completer-fresh', text);
      oddHooks.afterFirst = true;
      expect((await odd(base, 'odd-completer', text)).status).toBe(500);
      expect(await nest.get(IdempotencyCompleter).completeAbandoned()).toBe(1);
      const answered = await odd(base, 'odd-completer', text);
      expect(answered.status).toBe(201);
      expect(answered.text).toBe(fresh.text);
      expect(oddRan).toEqual(['first', 'second', 'first', 'second']);
    });

    it('phases reordered by a deploy: the retry is refused with phases-changed (500), nothing runs, the operator is told; the old order resumes', async () => {
      const { base } = await oddApp();
      oddHooks.afterFirst = true;
      expect((await odd(base, 'odd-reordered', 'x')).status).toBe(500);
      oddPhases = ['second', 'first'];
      const refused = await odd(base, 'odd-reordered', 'x');
      expect(refused.status).toBe(500);
      expect(JSON.parse(refused.text)).toEqual({ error: expect.stringContaining('was not continued') });
      expect(String(logs.errors.mock.calls.at(-1)?.[0])).toMatch(
        /committed \["first"\], and this one reached "second" before \["first"\]: the handler's phases changed/,
      );
      expect(oddRan).toEqual(['first']);
      oddPhases = ['first', 'third', 'second'];
      expect((await odd(base, 'odd-reordered', 'x')).status).toBe(201); // a phase added after the committed ones is fine
      expect(oddRan).toEqual(['first', 'third', 'second']);
    });
  });

  it('on a database migrated to 001 only: the store opens and serves other routes, a phased route answers 503 naming the table', async () => {
    const url = await server.createDatabase(`phases_001_${process.pid}`);
    const old = new pg.Pool({ connectionString: url, max: 4 });
    try {
      await old.query(readFileSync('sql/postgres/001_idempotency_records.sql', 'utf8'));
      const store = new PostgresStore({ pool: old, createSchema: false, sweepIntervalMs: 0 });
      const nest = await start('express', {
        imports: [IdempotencyModule.forRoot({ store, transactions: new PgTransactions(old) })],
        controllers: [RidesController],
        providers: [RideBooking],
      });
      const base = await listen(nest);
      // The health check says what every phased request will meet (issue 44 item 15: it said "up").
      expect(await nest.get(IdempotencyHealthIndicator).isHealthy('idempotency')).toEqual({
        idempotency: {
          status: 'down',
          store: 'PostgresStore',
          message:
            `PostgresStore: atomicPhases routes answer 503: the recovery points' table "public"."idempotency_records_phases" is missing ` +
            '(createSchema is false: apply the migrations 002 and 004, or schemaSql())',
        },
      });
      const refused = await book(base, 'old-schema', { rider: 'old-schema', amount: 100 });
      expect(refused.status).toBe(503);
      expect(refused.text).toBe('{"error":"idempotency store unavailable; retry shortly"}');
      const logged = String(logs.errors.mock.calls.at(-1)?.[0]);
      expect(logged).toContain('idempotency_records_phases');
      expect(logged).toContain('RidesController.book: the key was claimed but its recovery point could not be read');
      expect(logged).not.toContain('claim failed');
      expect(await store.sweep()).toBe(0); // the sweep leaves the missing table alone
      await store.ping(); // a store asked for nothing more is up
      // Migrated to 002 but not 004: the health check names the missing columns.
      await old.query(readFileSync('sql/postgres/002_idempotency_phases.sql', 'utf8'));
      await expect(store.ping({ recoveryPoints: true })).rejects.toThrow(
        'atomicPhases routes answer 503: column "public"."idempotency_records_phases".texts (jsonb) is missing; column "public"."idempotency_records_phases".input_text (text) is missing',
      );
      await old.query(readFileSync('sql/postgres/004_idempotency_phases_exact.sql', 'utf8'));
      await store.ping({ recoveryPoints: true });
      expect(await store.recoveryPoint('old-schema')).toBeUndefined();
      expect(await store.claim('other-route', { owner: 'o', fingerprint: 'f', leaseMs: 1_000 })).toEqual({ state: 'claimed' });
    } finally {
      await old.end();
    }
  });

  it("PostgresStore's recovery points: read back as stored, a workflow's only when named; fenced advance and finish; the index by its name", async () => {
    const store = new PostgresStore({ pool, sweepIntervalMs: 0 });
    await store.open();
    const tx = new PgTransactions(pool);
    const lease = { leaseMs: 10_000, ttlMs: 60_000 };
    expect(await store.claim('points-plain', { owner: 'o', fingerprint: 'fp', leaseMs: 10_000 })).toEqual({ state: 'claimed' });
    const advance = { fingerprint: 'fp', phase: 'one', result: '{"id":1}', ...lease };
    expect(await tx.run((sql) => store.advanceIn(sql, 'points-plain', 'o', advance))).toBe(true);
    expect(await tx.run((sql) => store.advanceIn(sql, 'points-plain', 'not me', { ...advance, phase: 'two' }))).toBe(false);
    expect(await store.recoveryPoint('points-plain')).toStrictEqual({
      fingerprint: 'fp',
      results: { one: { id: 1 } },
      phases: ['one'],
    });
    await store.claim('points-named', { owner: 'o', fingerprint: 'fp', leaseMs: 10_000 });
    await tx.run((sql) => store.advanceIn(sql, 'points-named', 'o', { ...advance, workflow: 'book', input: '{"rider":"r"}' }));
    expect(await store.recoveryPoint('points-named')).toStrictEqual({
      fingerprint: 'fp',
      results: { one: { id: 1 } },
      phases: ['one'],
      workflow: 'book',
      input: { rider: 'r' },
    });
    // Forget and the sweep on a store not opened yet: they connect first, and the recovery point goes too.
    const fresh = new PostgresStore({ pool, sweepIntervalMs: 0 });
    expect(await fresh.sweep()).toBe(0);
    expect(await fresh.forget('points-named')).toBe(true);
    expect(await store.recoveryPoint('points-named')).toBeUndefined();
    await fresh.close();
    const record = sampleRecord('fp');
    expect(await tx.run((sql) => store.finishIn(sql, 'points-plain', 'not me', record, 60_000))).toBe(false);
    expect(await tx.run((sql) => store.finishIn(sql, 'points-plain', 'o', record, 60_000))).toBe(true);
    expect(await store.recoveryPoint('points-plain')).toBeUndefined();
    const index = await pool.query("SELECT 1 FROM pg_indexes WHERE indexname = 'idempotency_records_phases_expires_at'");
    expect(index.rowCount).toBe(1);
    await store.close();
  });

  it('a recovery points table this release cannot use fails the start, naming the column', async () => {
    const url = await server.createDatabase(`phases_bad_${process.pid}`);
    const bad = new pg.Pool({ connectionString: url, max: 2 });
    try {
      await bad.query(readFileSync('sql/postgres/001_idempotency_records.sql', 'utf8'));
      await bad.query(
        readFileSync('sql/postgres/002_idempotency_phases.sql', 'utf8').replace(
          'results jsonb NOT NULL',
          'results text NOT NULL',
        ),
      );
      const store = new PostgresStore({ pool: bad, createSchema: false, sweepIntervalMs: 0 });
      await expect(store.open()).rejects.toThrow('column "public"."idempotency_records_phases".results is text, not jsonb');
    } finally {
      await bad.end();
    }
  });

  it('is refused at startup without the transactions port, on a store without recovery points, and with transactional', async () => {
    const refused = (options: IdempotencyModuleOptions) =>
      start('express', {
        imports: [IdempotencyModule.forRoot(options)],
        controllers: [RidesController],
        providers: [RideBooking],
      });
    const store = new PostgresStore({ pool, sweepIntervalMs: 0 });
    await expect(refused({ store })).rejects.toThrow(/atomicPhases: true needs the module option transactions/);
    await expect(refused({ store: new InMemoryStore(), transactions: new PgTransactions(pool) })).rejects.toThrow(
      /atomicPhases: true needs a store that commits its record in your transaction/,
    );
    await expect(refused({ store, transactions: new PgTransactions(pool), missingHeader: 'pass-through' })).rejects.toThrow(
      /atomicPhases: true needs a key on every request/,
    );
  });
});
