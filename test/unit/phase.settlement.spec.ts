import { describe, expect, it, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import { Subject, type Subscriber } from 'rxjs';
import type { PhaseSettler } from '../../lib/core/phase.settler.js';
import type { PhasedRun } from '../../lib/core/phases/phased.run.js';
import { IdempotencyException } from '../../lib/shared/exceptions/idempotency.exception.js';
import { LOGS } from '../../lib/shared/messages/operator.messages.js';
import type { ActiveClaim } from '../../lib/shared/interfaces/active-claim.interface.js';
import type { ResolvedIdempotencyOptions } from '../../lib/shared/interfaces/resolved-options.interface.js';
import type { StoredResponse } from '../../lib/shared/interfaces/stored-response.interface.js';
import { responseStart } from '../../lib/transports/http/handler.run.js';
import { PhaseSettlement } from '../../lib/transports/http/phase.settlement.js';
import { FakeResponse } from '../support/fake-response.js';
import { tick } from '../support/timing.js';

const claim = { route: 'Pay.create', storeKey: 'k', owner: 'o', fingerprint: 'fp' } as ActiveClaim;
const options = {
  errorFormat: 'json',
  replayFlag: 'header',
  replayedHeader: 'idempotent-replayed',
} as ResolvedIdempotencyOptions;
const kept = (status: number): StoredResponse => ({ status, headers: {}, body: Buffer.from(`{"status":${status}}`) });

/**
 * A settlement of an `atomicPhases` run on a fake response of either adapter, over a recording
 * settler whose `store` and `fail` answer what they are given.
 */
function settlementOn(
  adapter: 'express' | 'fastify',
  answers: { store?: IdempotencyException; fail?: IdempotencyException } = {},
  endedBy?: unknown,
) {
  const fake = new FakeResponse();
  const response =
    adapter === 'fastify' ? { raw: fake.raw, code: () => undefined, getHeaders: () => fake.getHeaders() } : fake.raw;
  const settler = {
    store: jest.fn((_c: ActiveClaim, _p: PhasedRun, _k: StoredResponse) => Promise.resolve(answers.store)),
    fail: jest.fn((_c: ActiveClaim, _p: PhasedRun, _err: unknown) => Promise.resolve(answers.fail)),
    giveUp: jest.fn((_c: ActiveClaim, _p: PhasedRun, _why: string) => Promise.resolve()),
  };
  const subscriber = { next: jest.fn(), error: jest.fn(), complete: jest.fn() };
  const phases = { endedBy } as PhasedRun;
  const settlement = new PhaseSettlement(
    settler as unknown as PhaseSettler,
    options,
    new Logger('test'),
    claim,
    phases,
    subscriber as unknown as Subscriber<unknown>,
    responseStart(response),
  );
  // The handler, driven by the test: its values, its completion.
  const handler = new Subject<unknown>();
  settlement.run.subscribe({ handle: () => handler }, subscriber as unknown as Subscriber<unknown>, settlement);
  return { fake, settler, subscriber, settlement, handler };
}

describe('PhaseSettlement', () => {
  it('holds the status line back until the COMMIT has landed, so that a failed COMMIT can still answer', () => {
    const { fake } = settlementOn('express');
    fake.raw.writeHead(201);
    expect(fake.calls).toEqual([]);
  });

  it('commits a response once: a second end, a stream or a give-up after it settles nothing', async () => {
    const { settlement, settler } = settlementOn('express');
    await settlement.ended(kept(201));
    await settlement.ended(kept(202));
    settlement.stream();
    expect(settler.store.mock.calls.map(([, , k]) => k.status)).toEqual([201]);
    expect(settler.giveUp).not.toHaveBeenCalled();
  });

  it("answers with the module's error when the COMMIT failed", async () => {
    const conflict = IdempotencyException.of('not-committed', 'the COMMIT failed', 503);
    const { settlement } = settlementOn('express', { store: conflict });
    const answer = await settlement.ended(kept(201));
    expect(answer?.status).toBe(conflict.getStatus());
    expect(JSON.parse(answer!.body.toString())).toEqual({ error: conflict.reason });
  });

  it('gives up once: a returned stream frees the key, and nothing is stored after it', async () => {
    const { settlement, settler } = settlementOn('express');
    expect(settlement.stream()).toBe(true);
    settlement.stream();
    await settlement.ended(kept(201));
    expect(settler.giveUp.mock.calls.map(([, , why]) => why)).toEqual([LOGS.returnedStream]);
    expect(settler.store).not.toHaveBeenCalled();
  });

  it('gives up on a body streamed by the handler, and stores the value Fastify encoded for @fastify/compress', async () => {
    const express = settlementOn('express');
    express.settlement.streamed();
    expect(express.settler.giveUp.mock.calls.map(([, , why]) => why)).toEqual([LOGS.streamed]);
    expect(express.settler.store).not.toHaveBeenCalled();

    const fastify = settlementOn('fastify');
    fastify.fake.statusCode = 201;
    fastify.handler.next({ paid: true });
    fastify.fake.setHeader('content-encoding', 'gzip');
    fastify.handler.complete();
    fastify.settlement.streamed();
    await tick();
    expect(fastify.settler.giveUp).not.toHaveBeenCalled();
    const [[, , stored]] = fastify.settler.store.mock.calls;
    expect(stored.status).toBe(201);
    expect(stored.body.toString()).toBe('{"paid":true}');
  });

  it("frees the key on a handler's error, answers what the settler says, and stores nothing after", async () => {
    const boom = new Error('boom');
    const freed = settlementOn('express');
    freed.settlement.error(boom);
    await tick();
    expect(freed.settler.fail.mock.calls.map(([, , err]) => err)).toEqual([boom]);
    expect(freed.subscriber.error).toHaveBeenCalledWith(boom);
    await freed.settlement.ended(kept(500));
    expect(freed.settler.store).not.toHaveBeenCalled();

    const unavailable = IdempotencyException.of('store-unavailable', 'down');
    const answered = settlementOn('express', { fail: unavailable });
    answered.settlement.error(boom);
    await tick();
    expect(answered.subscriber.error).toHaveBeenCalledWith(unavailable);
    expect(answered.fake.ended()).toBe(true);
  });

  it("keeps the error that ended the run (the filters' answer is stored), and only that error", async () => {
    const ended = new Error('card declined');
    const kept4xx = settlementOn('express', {}, ended);
    kept4xx.settlement.error(ended);
    expect(kept4xx.settlement.run.keepsError).toBe(true);
    expect(kept4xx.subscriber.error).toHaveBeenCalledWith(ended);
    expect(kept4xx.settler.fail).not.toHaveBeenCalled();

    // Neither another error nor an undefined one where no phase ended the run.
    for (const [err, endedBy] of [
      [new Error('other'), ended],
      [undefined, undefined],
    ]) {
      const other = settlementOn('express', {}, endedBy);
      other.settlement.error(err);
      expect(other.settlement.run.keepsError).toBe(false);
      expect(other.settler.fail).toHaveBeenCalledTimes(1);
    }
  });

  it("stores the handler's own value when it completes after an outer answer, and nothing when it completes in time", async () => {
    const detached = settlementOn('express');
    detached.handler.next({ late: true });
    detached.settlement.run.detach('a timeout answered');
    detached.fake.statusCode = 201;
    detached.handler.complete();
    await tick();
    expect(detached.subscriber.complete).toHaveBeenCalled();
    const [[, , stored]] = detached.settler.store.mock.calls;
    expect(stored.body.toString()).toBe('{"late":true}');

    const inTime = settlementOn('express');
    inTime.handler.next({ paid: true });
    inTime.handler.complete();
    await tick();
    expect(inTime.subscriber.complete).toHaveBeenCalled();
    expect(inTime.settler.store).not.toHaveBeenCalled();
  });
});
