import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  IdempotencyAdmin,
  type IdempotencyEvent,
  IdempotencyException,
  IdempotencyInbox,
  IdempotencyModule,
  type IdempotencyModuleOptions,
} from '../../lib/index.js';
import { spyOnLogger } from '../support/logger.js';
import { openStore, storeNames, type StoreUnderTest } from '../support/stores.js';
import { until } from '../support/timing.js';

/** A Nest application context (no HTTP) with the module, as a queue worker builds one. */
async function worker(options: IdempotencyModuleOptions): Promise<INestApplicationContext> {
  const moduleRef = await Test.createTestingModule({ imports: [IdempotencyModule.forRoot(options)] }).compile();
  return moduleRef.createNestApplication({ logger: false }).init();
}

/** What a consumer does: counts its runs, and waits on `release` when one is given. */
function charge() {
  const runs: string[] = [];
  let open: (() => void) | undefined;
  const work =
    (order: string, held = false) =>
    async () => {
      runs.push(order);
      if (held) await new Promise<void>((r) => (open = r));
      return { order, charged: 100, at: new Date(0) };
    };
  return { runs, work, release: () => open?.() };
}

const codeOf = (err: unknown) => (err instanceof IdempotencyException ? err.code : err);

describe.each(storeNames('IdempotencyInbox suite'))('IdempotencyInbox on %s', (name) => {
  const logs = spyOnLogger();
  let store: StoreUnderTest;
  let app: INestApplicationContext;
  let inbox: IdempotencyInbox;
  const events: IdempotencyEvent[] = [];
  let n = 0;
  const key = () => `msg-${name}-${++n}`;

  beforeAll(async () => {
    store = await openStore(name);
    app = await worker({ store: store.cache, events: (e) => void events.push(e) });
    inbox = app.get(IdempotencyInbox);
  }, 60_000);
  const others: INestApplicationContext[] = [];
  afterAll(async () => {
    await app?.close();
    for (const other of others) await other.close();
  });

  it('runs the work once: a redelivery after completion gets the stored result, read back as JSON', async () => {
    const { runs, work } = charge();
    const id = key();
    const first = await inbox.run(id, { consumer: 'Orders.created' }, work('o-1'));
    expect(first).toEqual({ value: { order: 'o-1', charged: 100, at: new Date(0) }, duplicate: false });
    const again = await inbox.run(id, { consumer: 'Orders.created' }, work('o-1'));
    expect(again).toEqual({ value: { order: 'o-1', charged: 100, at: new Date(0).toISOString() }, duplicate: true });
    expect(runs).toEqual(['o-1']);
    // Work that returns nothing is remembered as done too.
    const empty = key();
    expect(await inbox.run(empty, { consumer: 'Orders.created' }, () => undefined)).toEqual({
      value: undefined,
      duplicate: false,
    });
    expect(await inbox.run(empty, { consumer: 'Orders.created' }, () => 'again')).toEqual({ value: undefined, duplicate: true });
  });

  it('a delivery while the first still runs is refused with key-in-flight, and the work runs once', async () => {
    const { runs, work, release } = charge();
    const id = key();
    const first = inbox.run(id, { consumer: 'Orders.created' }, work('o-2', true));
    await until(() => runs.length === 1);
    const concurrent = await inbox.run(id, { consumer: 'Orders.created' }, work('o-2')).catch(codeOf);
    expect(concurrent).toBe('key-in-flight');
    release();
    expect((await first).duplicate).toBe(false);
    expect((await inbox.run(id, { consumer: 'Orders.created' }, work('o-2'))).duplicate).toBe(true);
    expect(runs).toEqual(['o-2']);
  });

  it('work that throws frees the key: the next delivery runs it again', async () => {
    const id = key();
    const failing = () => Promise.reject(new Error('card declined'));
    await expect(inbox.run(id, { consumer: 'Orders.created' }, failing)).rejects.toThrow('card declined');
    expect(await inbox.run(id, { consumer: 'Orders.created' }, () => 'paid')).toEqual({ value: 'paid', duplicate: false });
  });

  it('a key with another payload is refused; consumers and scopes keep keys apart', async () => {
    const id = key();
    const payload = { order: 'o-3', amount: 100 };
    await inbox.run(id, { consumer: 'Orders.created', payload }, () => 1);
    // The same content in another key order is the same message.
    const same = await inbox.run(id, { consumer: 'Orders.created', payload: { amount: 100, order: 'o-3' } }, () => 2);
    expect(same).toEqual({ value: 1, duplicate: true });
    const other = { consumer: 'Orders.created', payload: { order: 'o-3', amount: 99 } };
    expect(await inbox.run(id, other, () => 3).catch(codeOf)).toBe('key-reused');
    // Each consumer keeps its own records: the same id is another consumer's own message.
    expect(await inbox.run(id, { consumer: 'Refunds.created', payload }, () => 4)).toEqual({ value: 4, duplicate: false });
    expect(await inbox.run(id, { consumer: 'Orders.created', payload, scope: 'tenant-b' }, () => 5)).toEqual({
      value: 5,
      duplicate: false,
    });
    expect(await inbox.run(id, { consumer: 'Orders.created', payload, scope: 'tenant-c' }, () => 6)).toEqual({
      value: 6,
      duplicate: false,
    });
    // An operator finds each where IdempotencyAdmin looks: unscoped under no scope, the others under theirs.
    const admin = app.get(IdempotencyAdmin);
    const consumer = 'Orders.created';
    expect(await admin.inspect(id, { consumer })).toMatchObject({ state: 'completed' });
    expect(await admin.inspect(id, { consumer, scope: 'tenant-b' })).toMatchObject({ state: 'completed' });
    expect(await admin.inspect(id, { consumer, scope: 'tenant-d' })).toBeUndefined();
    // Not an HTTP key: an HTTP client's key of the same text names none of them.
    expect(await admin.inspect(id)).toBeUndefined();
  });

  it('reports outcomes under the consumer, with no HTTP method', async () => {
    const id = key();
    const mine = () => events.filter((e) => e.route === 'Events.observed');
    await inbox.run(id, { consumer: 'Events.observed' }, () => 1);
    await inbox.run(id, { consumer: 'Events.observed' }, () => 1);
    await until(() => mine().length === 2);
    expect(mine().map((e) => [e.outcome, e.method])).toEqual([
      ['executed', undefined],
      ['replayed', undefined],
    ]);
  });

  // Issue 44 item 3: the claim was neither committed nor released, and ran again after maxHoldMs + lease.
  it('a value JSON cannot hold (a BigInt, a cycle) settles the key: the caller gets it, a duplicate a result-unstorable refusal', async () => {
    const cyclic: { id: string; self?: object } = { id: 'o-7' };
    cyclic.self = cyclic;
    for (const value of [{ cents: 10n }, cyclic]) {
      const id = key();
      let ran = 0;
      const first = await inbox.run(id, { consumer: 'Orders.priced' }, () => (ran++, value));
      expect(first).toEqual({ value, duplicate: false });
      const again = await inbox.run(id, { consumer: 'Orders.priced' }, () => (ran++, value)).catch((err: unknown) => err);
      expect(again).toMatchObject({ code: 'result-unstorable', message: expect.stringContaining('(Object)') });
      expect((again as IdempotencyException).getStatus()).toBe(500);
      expect(ran).toBe(1);
    }
  });

  // Issue 49 item 4: a duplicate got the module's {"error":"…over N bytes…"} object as if it were the value.
  it('a value over maxResponseBytes: the caller gets it, a duplicate a response-too-large refusal, never the note as a value', async () => {
    // Closed after the suite's own: closing an application closes its store.
    const small = await worker({ store: store.cache, maxResponseBytes: 64 });
    others.push(small);
    const limited = small.get(IdempotencyInbox);
    const id = key();
    const big = { note: 'x'.repeat(100) };
    expect(await limited.run(id, { consumer: 'Orders.noted' }, () => big)).toEqual({ value: big, duplicate: false });
    const again = await limited.run(id, { consumer: 'Orders.noted' }, () => big).catch((err: unknown) => err);
    expect(again).toMatchObject({ code: 'response-too-large', message: expect.stringContaining('over 64 bytes') });
  });

  it("a consumer's first value with a part JSON changes (a Date) is logged once; its duplicate reads the JSON", async () => {
    const id = key();
    const at = new Date(0);
    await inbox.run(id, { consumer: 'Orders.dated' }, () => ({ at }));
    await inbox.run(key(), { consumer: 'Orders.dated' }, () => ({ at }));
    expect((await inbox.run(id, { consumer: 'Orders.dated' }, () => ({ at }))).value).toEqual({ at: at.toJSON() });
    const warned = logs.warnings.mock.calls
      .map((args: unknown[]) => String(args[0]))
      .filter((l: string) => l.startsWith('Orders.dated'));
    expect(warned).toEqual([expect.stringContaining('Orders.dated: its result holds a Date (read back as its string)')]);
  });

  it('forgets the key after ttlMs', async () => {
    const id = key();
    await inbox.run(id, { consumer: 'Orders.created', ttlMs: 1_000 }, () => 1);
    await store.advance(1_000);
    expect(await inbox.run(id, { consumer: 'Orders.created', ttlMs: 1_000 }, () => 2)).toEqual({ value: 2, duplicate: false });
  });
});

describe('IdempotencyInbox arguments', () => {
  let app: INestApplicationContext;
  beforeAll(async () => {
    app = await worker({});
  });
  afterAll(async () => {
    await app?.close();
  });

  it('a graceful shutdown waits for running work and refuses new deliveries with shutting-down', async () => {
    const closing = await worker({});
    const inbox = closing.get(IdempotencyInbox);
    const { runs, work, release } = charge();
    const running = inbox.run('s-1', { consumer: 'C' }, work('o-9', true));
    await until(() => runs.length === 1);
    let closed = false;
    const close = closing.close().then(() => (closed = true));
    await until(async () => (await inbox.run('s-2', { consumer: 'C' }, () => 1).catch(codeOf)) === 'shutting-down');
    expect(closed).toBe(false);
    release();
    expect((await running).duplicate).toBe(false);
    await close;
    expect(runs).toEqual(['o-9']);
  });

  // Issue 49 item 5: a quoted message id was unquoted as an HTTP header's Structured Field String is.
  it('takes a message id as it is: "order-7" quoted is another key than order-7; NFC and NFD are two keys', async () => {
    const inbox = app.get(IdempotencyInbox);
    const ran: string[] = [];
    for (const id of ['"order-7"', 'order-7', 'caf\u00e9', 'cafe\u0301']) {
      expect((await inbox.run(id, { consumer: 'Quoted' }, () => (ran.push(id), id))).duplicate).toBe(false);
    }
    expect(ran).toHaveLength(4);
    const invisible = await inbox.run('order\u20287', { consumer: 'Quoted' }, () => 1).catch(codeOf);
    expect(invisible).toBe('key-invalid');
  });

  it('keeps at most 1 000 resolved consumer options, the oldest dropped first', async () => {
    const inbox = app.get(IdempotencyInbox);
    for (let ttlMs = 1_000; ttlMs < 3_000; ttlMs++) await inbox.run(`ttl-${ttlMs}`, { consumer: 'Varied', ttlMs }, () => 1);
    expect((inbox as unknown as { routes: Map<string, unknown> }).routes.size).toBe(1_000);
  });

  it('refuses a key, consumer or scope that is not a non-empty string, and a scope over maxScopeLength', async () => {
    const inbox = app.get(IdempotencyInbox);
    for (const bad of ['', '  ', 5]) {
      await expect(inbox.run(bad as never, { consumer: 'C' }, () => 1)).rejects.toThrow(
        'IdempotencyInbox.run(): the key (the message id) must be a non-empty string',
      );
    }
    for (const options of [{}, { consumer: '' }, null, undefined, 'Orders']) {
      await expect(inbox.run('k', options as never, () => 1)).rejects.toThrow(
        'IdempotencyInbox.run(): options.consumer must be a non-empty string',
      );
    }
    await expect(inbox.run('k', { consumer: 'C', scope: '' }, () => 1)).rejects.toThrow(
      'IdempotencyInbox.run(): options.scope, when given, must be a non-empty string',
    );
    const long = await inbox.run('k', { consumer: 'C', scope: 'x'.repeat(300) }, () => 1).catch((err: unknown) => err);
    expect(long).toMatchObject({ code: 'scope-invalid', message: expect.stringContaining('exceeds 255 characters') });
    await expect(inbox.run('k', { consumer: 'C', ttlMs: 0 }, () => 1)).rejects.toThrow(
      'IdempotencyInbox.run(): ttlMs must be an integer from 1 to 31536000000, got 0',
    );
  });
});
