import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  BadRequestException,
  Body,
  type CallHandler,
  Controller,
  type ExecutionContext,
  Inject,
  Injectable,
  type INestApplication,
  type NestInterceptor,
  Post,
  RequestTimeoutException,
  Res,
  Sse,
  StreamableFile,
} from '@nestjs/common';
import fastifyCompress from '@fastify/compress';
import { APP_INTERCEPTOR } from '@nestjs/core';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import pg from 'pg';
import { catchError, delay, last, map, mergeMap, NEVER, type Observable, throwError, timeout, TimeoutError } from 'rxjs';
import {
  type IdempotencyEvent,
  IdempotencyKey,
  IdempotencyModule,
  type IdempotencyModuleOptions,
  Idempotent,
  InMemoryStore,
  PostgresStore,
} from '../../lib/index.js';
import { ADAPTERS, type AdapterName, listen, startApp, useApps } from '../support/app.js';
import { spyOnLogger } from '../support/logger.js';
import { PgTransactions } from '../support/pg-transactions.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { sleep, until } from '../support/timing.js';

// The transactional sequence (one transaction: the handler's writes, the completion, COMMIT) is drawn in
// docs/guides/exactly-once.md.
const describePg = postgresAvailable('transactional PostgreSQL suite') ? describe : describe.skip;

let server: PostgresServer;
let url: string;
let pool: pg.Pool;

/** What the next handler run does; reset before each test. */
const behaviour = { delayMs: 0, failOnce: false, swallowOnce: false, conflictOnce: false };

interface ChargeBody {
  amount: number;
  outcome?: 'decline' | 'stream';
}

@Controller('charges')
class ChargesController {
  constructor(@Inject(PgTransactions) private readonly tx: PgTransactions) {}

  // The handler writes through the transaction the module opened, as a @Transactional() service would.
  @Post()
  @Idempotent({ transactional: true })
  async create(
    @Body() body: ChargeBody,
    @IdempotencyKey() key: string,
    @Res({ passthrough: true }) res: { status(code: number): unknown },
  ): Promise<unknown> {
    const delay = behaviour.delayMs;
    const { rows } = await this.tx.client.query<{ id: number }>(
      'INSERT INTO charges (key, amount) VALUES ($1, $2) RETURNING id',
      [key, body.amount],
    );
    await sleep(delay);
    if (behaviour.failOnce) {
      behaviour.failOnce = false;
      throw new BadRequestException('card declined by the bank');
    }
    if (behaviour.swallowOnce) {
      // An SQL error caught without a savepoint: the transaction is aborted, the handler returns anyway.
      behaviour.swallowOnce = false;
      await this.tx.client.query('SELECT 1 / 0').catch(() => undefined);
    }
    if (behaviour.conflictOnce) {
      // The handler's own statement fails with a serialization failure (SQLSTATE 40001).
      behaviour.conflictOnce = false;
      await this.tx.client.query(`DO $$ BEGIN RAISE EXCEPTION 'could not serialize access' USING ERRCODE = '40001'; END $$`);
    }
    if (body.outcome === 'stream') return new StreamableFile(Buffer.from('receipt'));
    if (body.outcome === 'decline') res.status(402);
    return { id: rows[0].id, amount: body.amount, outcome: body.outcome ?? 'paid' };
  }
}

/** A global interceptor that wraps every body: what goes out is not what the handler returned. */
@Injectable()
class EnvelopeInterceptor implements NestInterceptor {
  intercept(_: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(map((data: unknown) => ({ data, at: 'envelope' })));
  }
}

/** Fails every response once the handler has completed, as a broken serializer would. */
@Injectable()
class FailingAfterInterceptor implements NestInterceptor {
  intercept(_: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      last(),
      mergeMap(() => throwError(() => new Error('serializer broke'))),
    );
  }
}

/** Holds the handler's value back longer than a short transaction timeout. */
@Injectable()
class LateInterceptor implements NestInterceptor {
  intercept(_: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(delay(400));
  }
}

/** Takes the handler's value and never answers: the response never reaches end(). */
@Injectable()
class HungInterceptor implements NestInterceptor {
  intercept(_: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(mergeMap(() => NEVER));
  }
}

/** Sends the handler's value as a stream: the response is written in parts and never reaches end() whole. */
@Injectable()
class StreamingInterceptor implements NestInterceptor {
  intercept(_: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(map((value) => new StreamableFile(Buffer.from(JSON.stringify(value)))));
  }
}

/** A global timeout, shorter than a slow handler. */
@Injectable()
class TimeoutInterceptor implements NestInterceptor {
  intercept(_: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      timeout(150),
      catchError((err: unknown) => throwError(() => (err instanceof TimeoutError ? new RequestTimeoutException() : err))),
    );
  }
}

async function rows(key: string): Promise<number> {
  const { rows: found } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM charges WHERE key = $1', [key]);
  return found[0].n;
}

async function record(key: string): Promise<{ state: number; xmin: string } | undefined> {
  const { rows: found } = await pool.query<{ state: number; xmin: string }>(
    'SELECT state, xmin::text AS xmin FROM idempotency_records WHERE key LIKE $1',
    [`%:${key}`],
  );
  return found[0];
}

interface Reply {
  status: number;
  text: string;
  headers: Headers;
}

async function charge(base: string, key: string, body: ChargeBody = { amount: 100 }): Promise<Reply> {
  const res = await fetch(`${base}/charges`, {
    method: 'POST',
    headers: { 'idempotency-key': key, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

describePg('@Idempotent({ transactional: true }) on PostgreSQL', () => {
  const start = useApps();
  const logs = spyOnLogger();

  beforeAll(async () => {
    server = await PostgresServer.start();
    url = await server.createDatabase(`transactional_${process.pid}`);
    pool = new pg.Pool({ connectionString: url, max: 10 });
    pool.on('error', () => undefined);
    await pool.query('CREATE TABLE charges (id serial PRIMARY KEY, key text NOT NULL, amount integer NOT NULL)');
  }, 60_000);
  afterAll(async () => {
    await pool?.end();
    await server?.destroy();
  });

  /** An app whose charges route is transactional; `tx` is its port, `options` override the module's. */
  async function app(
    adapter: AdapterName,
    options: IdempotencyModuleOptions = {},
    extra: { interceptors?: (new () => NestInterceptor)[]; configure?: (app: INestApplication) => void } = {},
  ): Promise<{ base: string; tx: PgTransactions; nest: INestApplication }> {
    behaviour.delayMs = 0;
    const tx = options.transactions instanceof PgTransactions ? options.transactions : new PgTransactions(pool);
    const nest = await start(
      adapter,
      {
        imports: [
          IdempotencyModule.forRoot({ store: new PostgresStore({ pool, sweepIntervalMs: 0 }), ...options, transactions: tx }),
        ],
        controllers: [ChargesController],
        providers: [
          { provide: PgTransactions, useValue: tx },
          ...(extra.interceptors ?? []).map((useClass) => ({ provide: APP_INTERCEPTOR, useClass })),
        ],
      },
      { configure: extra.configure },
    );
    return { base: await listen(nest), tx, nest };
  }

  describe.each(ADAPTERS)('%s', (adapter) => {
    const key = (name: string) => `${adapter}-${name}`;

    it('ten retries: one row, nine byte-identical replays', async () => {
      const { base } = await app(adapter);
      const first = await charge(base, key('ten'));
      expect(first.status).toBe(201);
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      for (let i = 0; i < 9; i++) {
        const again = await charge(base, key('ten'));
        expect({ status: again.status, text: again.text, type: again.headers.get('content-type') }).toEqual({
          status: 201,
          text: first.text,
          type: first.headers.get('content-type'),
        });
        expect(again.headers.get('idempotent-replayed')).toBe('true');
      }
      expect(await rows(key('ten'))).toBe(1);
    });

    it('errorBody and echoKeyHeader: the key echoed on the first answer, the replay and a 422, never stored', async () => {
      const { base } = await app(adapter, {
        echoKeyHeader: true,
        errorBody: ({ message }) => ({ error: { type: 'idempotency_error', message } }),
      });
      const first = await charge(base, key('echo'));
      expect(first.status).toBe(201);
      expect(first.headers.get('idempotency-key')).toBe(key('echo'));
      const again = await charge(base, `"${key('echo')}"`);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.headers.get('idempotency-key')).toBe(`"${key('echo')}"`);
      expect(again.text).toBe(first.text);
      const reused = await charge(base, key('echo'), { amount: 5 });
      expect(reused.status).toBe(422);
      expect(reused.headers.get('idempotency-key')).toBe(key('echo'));
      expect(JSON.parse(reused.text)).toEqual({
        error: { type: 'idempotency_error', message: 'idempotency-key was already used for a different request' },
      });
      expect(await rows(key('echo'))).toBe(1);
    });

    it('events: executed once COMMIT is done (store time includes the completion), replayed, released on a rollback', async () => {
      const events: IdempotencyEvent[] = [];
      const { base } = await app(adapter, { events: (e) => void events.push(e) });
      expect((await charge(base, key('ev'))).status).toBe(201);
      expect((await charge(base, key('ev'))).status).toBe(201);
      behaviour.failOnce = true;
      expect((await charge(base, key('ev-fail'))).status).toBe(400);
      await until(() => events.length === 3);
      expect(events.map((e) => [e.outcome, e.status, e.store])).toEqual([
        ['executed', 201, 'PostgresStore'],
        ['replayed', 201, 'PostgresStore'],
        ['released', undefined, 'PostgresStore'],
      ]);
      expect(events[0].storeMs).toBeGreaterThan(0);
      expect(await rows(key('ev-fail'))).toBe(0);
    });

    it('events: each way a transaction fails says what the key came to, with the status and code of its answer', async () => {
      const events: IdempotencyEvent[] = [];
      const listen = { events: (e: IdempotencyEvent) => void events.push(e) };
      const outcomes = async (count: number) => {
        await until(() => events.length === count);
        return events.splice(0).map((e) => [e.outcome, e.status, e.code]);
      };
      const { base, tx } = await app(adapter, { ...listen, transactionTimeoutMs: 2_000 });
      // The handler swallowed an SQL error: the key is freed, the answer is a 500.
      behaviour.swallowOnce = true;
      expect((await charge(base, key('ev-aborted'))).status).toBe(500);
      expect(await outcomes(1)).toEqual([['released', 500, 'transaction-aborted']]);
      // The handler's own statement lost a serialization conflict: its error, freed like any thrown one.
      behaviour.conflictOnce = true;
      expect((await charge(base, key('ev-conflict'))).status).toBe(503);
      expect(await outcomes(1)).toEqual([['released', undefined, undefined]]);
      // COMMIT refused and rolled back (a serialization failure at COMMIT): known not to have landed, freed.
      tx.beforeCommit = () => {
        throw Object.assign(new Error('could not serialize access'), { code: '40001' });
      };
      expect((await charge(base, key('ev-rolled-back'))).status).toBe(503);
      expect(await outcomes(1)).toEqual([['released', 503, 'not-committed']]);
      expect(await record(key('ev-rolled-back'))).toBeUndefined();
      // COMMIT lost with its connection: it may have landed, so the key is kept, not stored by us.
      tx.beforeCommit = async (client) => {
        await pool.query('SELECT pg_terminate_backend($1)', [(client as unknown as { processID: number }).processID]);
      };
      expect((await charge(base, key('ev-unknown'))).status).toBe(503);
      expect(await outcomes(1)).toEqual([['not-stored', 503, 'not-committed']]);
      expect(await record(key('ev-unknown'))).toBeDefined();

      const late = await app(adapter, { ...listen, transactionTimeoutMs: 200 }, { interceptors: [LateInterceptor] });
      expect((await charge(late.base, key('ev-late'))).status).toBe(409);
      expect(await outcomes(1)).toEqual([['not-stored', 409, 'transaction-timed-out']]);

      const broken = new pg.Pool({ connectionString: url.replace(/:\d+\//, ':1/'), connectionTimeoutMillis: 500 });
      const down = await app(adapter, { ...listen, transactions: new PgTransactions(broken) });
      expect((await charge(down.base, key('ev-begin'))).status).toBe(503);
      expect(await outcomes(1)).toEqual([['store-unavailable', 503, 'store-unavailable']]);
      await broken.end();
    });

    it('a response that never reaches end(): the transaction is ended and rolled back at its lease, holding no connection', async () => {
      const events: IdempotencyEvent[] = [];
      const { base } = await app(
        adapter,
        { transactionTimeoutMs: 300, events: (e) => void events.push(e) },
        { interceptors: [HungInterceptor] },
      );
      const client = new AbortController();
      const hung = fetch(`${base}/charges`, {
        method: 'POST',
        headers: { 'idempotency-key': key('hung'), 'content-type': 'application/json' },
        body: JSON.stringify({ amount: 100 }),
        signal: client.signal,
      }).catch(() => undefined);
      // Without the deadline the transaction would wait for the response for ever, holding its connection.
      await until(() => events.length === 1);
      expect(events.map((e) => [e.outcome, e.status, e.code])).toEqual([['not-stored', 409, 'transaction-timed-out']]);
      const open = await pool.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
      );
      expect(open.rows[0].n).toBe(0);
      expect(await rows(key('hung'))).toBe(0);
      client.abort();
      await hung;
    });

    it('encryption: the record committed in the transaction is sealed, and replays', async () => {
      const { base } = await app(adapter, { encryption: { keys: { k1: Buffer.alloc(32, 5) }, current: 'k1' } });
      const first = await charge(base, key('sealed'));
      expect(first.status).toBe(201);
      const { rows: stored } = await pool.query<{ record: Buffer }>('SELECT record FROM idempotency_records WHERE key LIKE $1', [
        `%:${key('sealed')}`,
      ]);
      expect(stored[0].record.toString('latin1').split('\n')[2]).toBe('k1');
      expect(stored[0].record.includes('"amount"')).toBe(false);
      const again = await charge(base, key('sealed'));
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.text).toBe(first.text);
    });

    it("the handler's INSERT and the completion are one transaction (one xmin)", async () => {
      const { base, tx } = await app(adapter);
      expect((await charge(base, key('xmin'))).status).toBe(201);
      const { rows: charged } = await pool.query<{ xmin: string }>('SELECT xmin::text AS xmin FROM charges WHERE key = $1', [
        key('xmin'),
      ]);
      expect(await record(key('xmin'))).toEqual({ state: 1, xmin: charged[0].xmin });
      expect(tx.commits).toBe(1);
    });

    it("what outer interceptors made of the body is committed and replayed, not the handler's value", async () => {
      const { base } = await app(adapter, {}, { interceptors: [EnvelopeInterceptor] });
      const first = await charge(base, key('envelope'));
      expect(JSON.parse(first.text)).toMatchObject({ at: 'envelope', data: { amount: 100 } });
      expect((await charge(base, key('envelope'))).text).toBe(first.text);
    });

    it('the handler throws after its INSERT: rolled back, its error goes out, and the retry runs and succeeds', async () => {
      const { base } = await app(adapter);
      behaviour.failOnce = true;
      const failed = await charge(base, key('throws'));
      expect(failed.status).toBe(400);
      expect(JSON.parse(failed.text)).toMatchObject({ message: 'card declined by the bank' });
      expect(await rows(key('throws'))).toBe(0);
      expect(await record(key('throws'))).toBeUndefined();
      expect(await charge(base, key('throws'))).toMatchObject({ status: 201 });
      expect(await rows(key('throws'))).toBe(1);
      expect(logs.errors).not.toHaveBeenCalled();
    });

    // H27 (issue 22 item 13): a handler that swallowed its own SQL error returned 201 into an aborted
    // transaction; every attempt got 503 "retry shortly" and ran again, for ever.
    it('a handler that swallowed an SQL error (aborted transaction): 500 without Retry-After, logged, the key freed', async () => {
      const { base } = await app(adapter);
      behaviour.swallowOnce = true;
      const failed = await charge(base, key('swallowed'));
      expect(failed.status).toBe(500);
      expect(failed.headers.get('retry-after')).toBeNull();
      expect(JSON.parse(failed.text)).toEqual({ error: 'the request failed on the server and nothing was committed' });
      expect(logs.errors).toHaveBeenCalledWith(expect.stringContaining('run such statements in a savepoint'));
      expect(await rows(key('swallowed'))).toBe(0);
      expect(await record(key('swallowed'))).toBeUndefined();
      expect(await charge(base, key('swallowed'))).toMatchObject({ status: 201 });
      expect(await rows(key('swallowed'))).toBe(1);
    });

    // H27: a serialization failure or deadlock raised by the handler's own statement went out as a plain 500.
    it("a serialization failure of the handler's own statement: 503 with Retry-After, the key freed, the retry commits", async () => {
      const { base } = await app(adapter);
      behaviour.conflictOnce = true;
      const failed = await charge(base, key('conflict'));
      expect(failed.status).toBe(503);
      expect(failed.headers.get('retry-after')).toBe('1');
      expect(await rows(key('conflict'))).toBe(0);
      expect(await charge(base, key('conflict'))).toMatchObject({ status: 201 });
      expect(await rows(key('conflict'))).toBe(1);
    });

    it('REPEATABLE READ: a key taken over while the handler ran: the completion matches nothing, rolled back, 409', async () => {
      const { base } = await app(adapter, {
        transactionTimeoutMs: 300,
        transactions: new PgTransactions(pool, 'REPEATABLE READ'),
      });
      behaviour.delayMs = 700;
      const slow = charge(base, key('rr'));
      await sleep(400);
      behaviour.delayMs = 0;
      const second = await charge(base, key('rr'));
      expect(second.status).toBe(201);
      const first = await slow;
      expect(first.status).toBe(409);
      expect(await rows(key('rr'))).toBe(1);
    });

    it.each([
      ['node-postgres', { code: '40001' }],
      ['TypeORM', { driverError: { code: '40P01' } }],
    ])(
      'COMMIT refused (serialization failure, deadlock; %s error): rolled back for sure, so 503 and the key is free at once',
      async (driver, fields) => {
        const { base, tx } = await app(adapter);
        tx.beforeCommit = () => {
          throw Object.assign(new Error('could not serialize access due to read/write dependencies'), fields);
        };
        const refused = await charge(base, key(`serialize-${driver}`));
        expect(refused.status).toBe(503);
        expect(await record(key(`serialize-${driver}`))).toBeUndefined();
        expect((await charge(base, key(`serialize-${driver}`))).status).toBe(201);
        expect(await rows(key(`serialize-${driver}`))).toBe(1);
        expect(logs.errors).toHaveBeenCalledWith(expect.stringContaining('the transaction was rolled back, answering 503'));
      },
    );

    it('an outer layer that fails after the handler: its error goes out, the handler result commits and is replayed', async () => {
      const { base } = await app(adapter, {}, { interceptors: [FailingAfterInterceptor] });
      const failed = await charge(base, key('outer-error'));
      expect(failed.status).toBe(500);
      const retry = await charge(base, key('outer-error'));
      expect(retry.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(JSON.parse(retry.text)).toMatchObject({ amount: 100, outcome: 'paid' });
      expect(await rows(key('outer-error'))).toBe(1);
    });

    it('a response that does not reach end() within the lease: rolled back at its end, 409, the key free', async () => {
      const { base } = await app(adapter, { transactionTimeoutMs: 200 }, { interceptors: [LateInterceptor] });
      const late = await charge(base, key('late'));
      expect(late.status).toBe(409);
      expect(late.headers.get('retry-after')).toBe('1');
      expect(await rows(key('late'))).toBe(0);
      // The lease has ended with the deadline, so the key is free: the retry runs (and is late again).
      expect((await charge(base, key('late'))).status).toBe(409);
      expect(await rows(key('late'))).toBe(0);
      expect(logs.warnings).toHaveBeenCalledWith(
        'ChargesController.create: the transactional request ran past its transactionTimeoutMs lease; its transaction is rolled back, answering 409',
      );
    });

    it('a response that reaches end() late but within the lease commits: the deadline is the lease, not the handler', async () => {
      const { base } = await app(adapter, { transactionTimeoutMs: 10_000 }, { interceptors: [LateInterceptor] });
      expect((await charge(base, key('late-in-lease'))).status).toBe(201);
      expect(await rows(key('late-in-lease'))).toBe(1);
    });

    it("an outer layer that streams the handler's value: the value is committed with the writes, and a retry gets it as JSON", async () => {
      const { base } = await app(adapter, { transactionTimeoutMs: 5_000 }, { interceptors: [StreamingInterceptor] });
      const first = await charge(base, key('streamed'));
      expect(first.status).toBe(201);
      // A stream goes out as it is written: COMMIT may answer after the client has read it all.
      await until(async () => (await rows(key('streamed'))) === 1);
      const again = await charge(base, key('streamed'));
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(JSON.parse(again.text)).toEqual(JSON.parse(first.text));
    });

    it("the transaction's connection dies while the handler runs: the completion fails, rolled back, 503, the key freed", async () => {
      const events: IdempotencyEvent[] = [];
      const { base } = await app(adapter, { events: (e) => void events.push(e) });
      behaviour.delayMs = 1_000;
      const answer = charge(base, key('conn-died'));
      const backend = async () =>
        (
          await pool.query<{ pid: number }>(
            "SELECT pid FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND query LIKE 'INSERT INTO charges%'",
          )
        ).rows[0]?.pid;
      await until(async () => (await backend()) !== undefined);
      await pool.query('SELECT pg_terminate_backend($1)', [await backend()]);
      const died = await answer;
      expect(died.status).toBe(503);
      await until(() => events.length === 1);
      expect(events.map((e) => [e.outcome, e.status, e.code])).toEqual([['released', 503, 'not-committed']]);
      expect(await record(key('conn-died'))).toBeUndefined();
      expect((await charge(base, key('conn-died'))).status).toBe(201);
    });

    it('a transactions port that fails COMMIT with no error at all (undefined): still a 503, never the success', async () => {
      const { base, tx } = await app(adapter);
      // A rejection carrying nothing, as a hand-written port can produce.
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the point of the test
      tx.beforeCommit = () => Promise.reject(undefined);
      const answer = await charge(base, key('no-error'));
      expect(answer.status).toBe(503);
      expect(JSON.parse(answer.text)).toEqual({ error: expect.stringContaining('could not be committed') });
    });

    it('a returned 4xx is committed with the writes and replayed', async () => {
      const { base } = await app(adapter);
      const declined = await charge(base, key('declined'), { amount: 100, outcome: 'decline' });
      expect(declined.status).toBe(402);
      const again = await charge(base, key('declined'), { amount: 100, outcome: 'decline' });
      expect({ status: again.status, text: again.text, replayed: again.headers.get('idempotent-replayed') }).toEqual({
        status: 402,
        text: declined.text,
        replayed: 'true',
      });
      expect(await rows(key('declined'))).toBe(1);
    });

    it('a handler slower than its lease whose key was taken over: rolled back, 409, exactly one row', async () => {
      const { base } = await app(adapter, { transactionTimeoutMs: 300 });
      behaviour.delayMs = 700;
      const slow = charge(base, key('taken'));
      await sleep(400);
      behaviour.delayMs = 0;
      const second = await charge(base, key('taken'));
      expect(second.status).toBe(201);
      const first = await slow;
      expect(first.status).toBe(409);
      expect(first.headers.get('retry-after')).toBe('1');
      expect(JSON.parse(first.text)).toEqual({
        error:
          'the request ran past its transaction timeout and was rolled back; another request with this idempotency-key may be running, retry shortly',
      });
      expect(await rows(key('taken'))).toBe(1);
      const replay = await charge(base, key('taken'));
      expect({ status: replay.status, text: replay.text }).toEqual({ status: 201, text: second.text });
      expect(logs.warnings).toHaveBeenCalledWith(
        'ChargesController.create: the transactional request ran past its transactionTimeoutMs lease; its transaction is rolled back, answering 409',
      );
    });

    it('the connection dies before COMMIT: 503, the key is kept until its lease ends, then exactly one rerun', async () => {
      // As problem details here: the runner's own errors carry their codes too.
      const { base, tx } = await app(adapter, { transactionTimeoutMs: 600, errorFormat: 'problem+json' });
      tx.beforeCommit = async (client) => {
        await pool.query('SELECT pg_terminate_backend($1)', [(client as unknown as { processID: number }).processID]);
      };
      const lost = await charge(base, key('commit'));
      expect(lost.status).toBe(503);
      expect(lost.headers.get('retry-after')).toBe('1');
      expect(lost.headers.get('content-type')).toBe('application/problem+json');
      expect(JSON.parse(lost.text)).toEqual({
        type: 'urn:nestjs-idempotency:problem:not-committed',
        title: 'Request was not committed',
        status: 503,
        detail: 'the request could not be committed; retry shortly with the same key',
      });
      expect(lost.headers.get('content-length')).toBe(String(Buffer.byteLength(lost.text)));
      expect(await rows(key('commit'))).toBe(0);
      expect((await charge(base, key('commit'))).status).toBe(409);
      await sleep(700);
      expect((await charge(base, key('commit'))).status).toBe(201);
      expect(await rows(key('commit'))).toBe(1);
      expect(logs.errors).toHaveBeenCalledWith(expect.stringContaining('COMMIT failed with an unknown outcome'));
    });

    it('the transaction cannot be opened: 503 before the handler runs, and the key is free again', async () => {
      const broken = new pg.Pool({ connectionString: url.replace(/:\d+\//, ':1/'), connectionTimeoutMillis: 500 });
      const { base } = await app(adapter, { transactions: new PgTransactions(broken) });
      const down = await charge(base, key('begin'));
      expect(down.status).toBe(503);
      expect(JSON.parse(down.text)).toEqual({ error: 'idempotency store unavailable; retry shortly' });
      expect(await rows(key('begin'))).toBe(0);
      expect(await record(key('begin'))).toBeUndefined();
      expect(logs.errors).toHaveBeenCalledWith(expect.stringContaining('the transaction could not be opened'));
      expect(logs.warnings).not.toHaveBeenCalled();
      await broken.end();
    });

    it('an outer timeout answers first: the handler finishes in its transaction and its own result is replayed', async () => {
      const { base } = await app(adapter, {}, { interceptors: [TimeoutInterceptor] });
      behaviour.delayMs = 400;
      const timedOut = await charge(base, key('timeout'));
      expect(timedOut.status).toBe(408);
      let retry = await charge(base, key('timeout'));
      for (let i = 0; i < 50 && retry.status === 409; i++) {
        await sleep(50);
        retry = await charge(base, key('timeout'));
      }
      expect(retry.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(JSON.parse(retry.text)).toMatchObject({ amount: 100, outcome: 'paid' });
      expect(await rows(key('timeout'))).toBe(1);
      expect(logs.warnings).toHaveBeenCalledWith(
        'ChargesController.create: the request was abandoned (client gone, or an outer timeout or error) before the handler finished; it runs to completion and its own result is stored',
      );
    });

    it('a stream returned at run time is rolled back, answered 500, and the key freed', async () => {
      const { base } = await app(adapter);
      const streamed = await charge(base, key('stream'), { amount: 100, outcome: 'stream' });
      expect(streamed.status).toBe(500);
      expect(await rows(key('stream'))).toBe(0);
      expect(await record(key('stream'))).toBeUndefined();
      expect(logs.errors).toHaveBeenCalledWith(expect.stringContaining('a transactional handler returned a stream'));
    });
  });

  it('Fastify with @fastify/compress: the identity representation is committed; each retry gets the encoding it asks for', async () => {
    const { base } = await app(
      'fastify',
      {},
      { configure: (a) => void (a as NestFastifyApplication).register(fastifyCompress, { threshold: 0 }) },
    );
    const send = (encoding: string) =>
      fetch(`${base}/charges`, {
        method: 'POST',
        headers: { 'idempotency-key': 'compressed', 'content-type': 'application/json', 'accept-encoding': encoding },
        body: JSON.stringify({ amount: 100 }),
      });
    const first = await send('gzip');
    expect(first.status).toBe(201);
    expect(first.headers.get('content-encoding')).toBe('gzip');
    const body = await first.text();
    expect(await rows('compressed')).toBe(1);
    const identity = await send('identity');
    expect(identity.headers.get('idempotent-replayed')).toBe('true');
    expect(identity.headers.get('content-encoding')).toBeNull();
    expect(await identity.text()).toBe(body);
  });

  describe('bootstrap refusals', () => {
    @Controller('r')
    class PlainTransactional {
      @Post()
      @Idempotent({ transactional: true })
      create(): object {
        return {};
      }
    }

    const refusal = (metadata: Parameters<typeof startApp>[1]) =>
      startApp('express', metadata).then(
        (nest) => nest.close().then(() => 'started'),
        (err: Error) => err.message,
      );

    it('without a transactions option', async () => {
      expect(
        await refusal({
          imports: [IdempotencyModule.forRoot({ store: new PostgresStore({ pool, sweepIntervalMs: 0 }) })],
          controllers: [PlainTransactional],
        }),
      ).toBe(
        '@Idempotent() on PlainTransactional.create(): transactional: true needs the module option transactions, e.g. transactions: clsTransactions(txHost) (docs/guides/exactly-once.md)',
      );
    });

    it('with a store that is not PostgresStore', async () => {
      expect(
        await refusal({
          imports: [IdempotencyModule.forRoot({ store: new InMemoryStore(), transactions: new PgTransactions(pool) })],
          controllers: [PlainTransactional],
        }),
      ).toBe(
        "@Idempotent() on PlainTransactional.create(): transactional: true needs a store that commits its record in your transaction: store: new PostgresStore(...) or new MySqlStore(...) on your application's database",
      );
    });

    it('on a route that streams, or uses @Res() or @Sse()', async () => {
      @Controller('s')
      class Streams {
        @Post()
        @Idempotent({ transactional: true })
        file(): StreamableFile {
          return new StreamableFile(Buffer.from('x'));
        }
      }
      @Controller('o')
      class OwnResponse {
        @Post()
        @Idempotent({ transactional: true })
        create(@Res() res: { json(v: unknown): void }): void {
          res.json({});
        }
      }
      @Controller('e')
      class Events {
        @Post()
        @Sse()
        @Idempotent({ transactional: true })
        events(): Observable<never> {
          return throwError(() => new Error('never called'));
        }
      }
      const module = () =>
        IdempotencyModule.forRoot({
          store: new PostgresStore({ pool, sweepIntervalMs: 0 }),
          transactions: new PgTransactions(pool),
        });
      expect(await refusal({ imports: [module()], controllers: [Streams] })).toBe(
        '@Idempotent() on Streams.file(): transactional: true cannot return a StreamableFile: a stream cannot be recorded before COMMIT',
      );
      expect(await refusal({ imports: [module()], controllers: [OwnResponse] })).toContain(
        '@Idempotent() on OwnResponse.create(): @Res()/@Next() without { passthrough: true }',
      );
      expect(await refusal({ imports: [module()], controllers: [Events] })).toContain(
        '@Idempotent() on Events.events(): an @Sse()',
      );
      expect(await refusal({ imports: [module()], controllers: [PlainTransactional] })).toBe('started');
    });

    it('transactional must be a boolean, and transactions a port', async () => {
      @Controller('b')
      class NotBoolean {
        @Post()
        @Idempotent({ transactional: 'yes' as unknown as boolean })
        create(): object {
          return {};
        }
      }
      expect(await refusal({ imports: [IdempotencyModule.forRoot({})], controllers: [NotBoolean] })).toBe(
        "@Idempotent() on NotBoolean.create(): transactional must be true or false, got the string 'yes'",
      );
      expect(await refusal({ imports: [IdempotencyModule.forRoot({ transactions: {} as never })], controllers: [] })).toBe(
        'IdempotencyModule: transactions must be an IdempotencyTransactions: an object with run(work), e.g. clsTransactions(txHost)',
      );
    });
  });
});
