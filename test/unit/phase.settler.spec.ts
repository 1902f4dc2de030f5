import { describe, expect, it, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import { PhaseSettler } from '../../lib/core/phase.settler.js';
import { TransactionFailures } from '../../lib/core/transaction.failures.js';
import type { IdempotencyService } from '../../lib/core/idempotency.service.js';
import type { LeaseRenewer } from '../../lib/core/lease.renewer.js';
import type { OutcomeReporter } from '../../lib/core/events/outcome.reporter.js';
import type { RecordBuilder } from '../../lib/core/record.builder.js';
import type { PhasedRun } from '../../lib/core/phases/phased.run.js';
import { IdempotencyException } from '../../lib/shared/exceptions/idempotency.exception.js';
import { LeaseLost } from '../../lib/shared/exceptions/lease-lost.error.js';
import type { ActiveClaim } from '../../lib/shared/interfaces/active-claim.interface.js';
import type { RecoveryPoint } from '../../lib/shared/interfaces/recovery-point.interface.js';
import type { ResolvedIdempotencyOptions } from '../../lib/shared/interfaces/resolved-options.interface.js';

const claim = { route: 'Pay.create', storeKey: 'k', owner: 'o', fingerprint: 'fp' } as ActiveClaim;
const kept = { status: 201, headers: {}, body: Buffer.from('{"id":1}') };

/** A settler over recording stand-ins; `point` is what the store's recovery point read gives. */
function settlerWith(point: () => Promise<RecoveryPoint | undefined> = () => Promise.resolve(undefined)) {
  const unavailableAnswer = IdempotencyException.of('store-unavailable', 'down');
  const service = {
    release: jest.fn((_claim: ActiveClaim, _outcome?: string, _answer?: IdempotencyException) => Promise.resolve()),
    unavailable: jest.fn((_claim: ActiveClaim, _why: string) => Promise.resolve(unavailableAnswer)),
  };
  const leases = { hold: jest.fn(), unhold: jest.fn() };
  const reporter = { settled: jest.fn() };
  const options = {
    headerName: 'idempotency-key',
    store: { recoveryPoint: jest.fn(point) },
    transactions: { run: jest.fn() },
  } as unknown as ResolvedIdempotencyOptions;
  const failures = new TransactionFailures(service as unknown as IdempotencyService, reporter as unknown as OutcomeReporter);
  const settler = new PhaseSettler(
    options,
    service as unknown as IdempotencyService,
    { record: jest.fn() } as unknown as RecordBuilder,
    leases as unknown as LeaseRenewer,
    failures,
    reporter as unknown as OutcomeReporter,
  );
  return { settler, service, leases, reporter, unavailableAnswer };
}

/** A run whose `settle` does what `settled` says; `abandon` records. */
function runThat(settled: () => Promise<void>, completed = false) {
  return { settle: jest.fn(settled), abandon: jest.fn(), completed } as unknown as PhasedRun & {
    settle: jest.Mock;
    abandon: jest.Mock;
  };
}

const sqlError = (code: string) => Object.assign(new Error(`sql ${code}`), { code });

describe('PhaseSettler', () => {
  describe('resume', () => {
    it('a key without a recovery point starts from the first phase', async () => {
      const { settler, service } = settlerWith();
      const run = await settler.resume(claim, () => false);
      expect(run.done).toEqual([]);
      expect(service.release).not.toHaveBeenCalled();
    });

    it("resumes after the phases the request's earlier attempts committed", async () => {
      const { settler } = settlerWith(() => Promise.resolve({ fingerprint: 'fp', results: { a: 1, b: 2 }, phases: ['a', 'b'] }));
      const seen: string[] = [];
      const run = await settler.resume(claim, (fingerprint) => (seen.push(fingerprint), true));
      expect(run.done).toEqual(['a', 'b']);
      expect(seen).toEqual(['fp']);
    });

    it("refuses another request's recovery point with 422, the key released as a mismatch", async () => {
      const { settler, service } = settlerWith(() => Promise.resolve({ fingerprint: 'other', results: { a: 1 } }));
      const err = await settler.resume(claim, () => false).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(IdempotencyException);
      expect((err as IdempotencyException).code).toBe('key-reused');
      expect(service.release).toHaveBeenCalledWith(claim, 'mismatch', err as IdempotencyException);
    });

    it('answers an unreadable recovery point with the store-unavailable answer, naming the route and cause', async () => {
      const { settler, service, unavailableAnswer } = settlerWith(() => Promise.reject(new Error('ECONNRESET')));
      await expect(settler.resume(claim, () => true)).rejects.toBe(unavailableAnswer);
      expect(service.unavailable.mock.calls[0][1]).toContain('Pay.create');
      expect(service.unavailable.mock.calls[0][1]).toContain('ECONNRESET');
    });
  });

  it('hold keeps the lease renewed', () => {
    const { settler, leases } = settlerWith();
    settler.hold(claim);
    expect(leases.hold).toHaveBeenCalledWith(claim);
  });

  describe('store', () => {
    it('a committed response is reported executed with its status, and the lease let go', async () => {
      const { settler, leases, reporter, service } = settlerWith();
      const run = runThat(() => Promise.resolve());
      await expect(settler.store(claim, run, kept)).resolves.toBeUndefined();
      expect(run.settle).toHaveBeenCalledWith(kept);
      expect(reporter.settled).toHaveBeenCalledWith(claim, 'executed', 201);
      expect(leases.unhold).toHaveBeenCalledWith(claim);
      expect(service.release).not.toHaveBeenCalled();
    });

    it('a COMMIT that may have landed is answered 503 and the key kept, so a retry cannot run the handler twice', async () => {
      const { settler, leases, service } = settlerWith();
      const run = runThat(() => Promise.reject(new Error('connection lost')), true);
      const answer = await settler.store(claim, run, kept);
      expect(answer?.code).toBe('not-committed');
      expect(service.release).not.toHaveBeenCalled();
      expect(leases.unhold).toHaveBeenCalledWith(claim);
    });

    it('a transaction rolled back before its completion is answered 503 and frees the key', async () => {
      const { settler, service } = settlerWith();
      const answer = await settler.store(
        claim,
        runThat(() => Promise.reject(sqlError('40001')), false),
        kept,
      );
      expect(answer?.code).toBe('not-committed');
      expect(service.release).toHaveBeenCalledWith(claim, 'released', answer);
    });
  });

  describe('fail', () => {
    it("the handler's own error frees the key, keeps its error as the answer and abandons a waiting finish()", async () => {
      const { settler, service, leases } = settlerWith();
      const run = runThat(() => Promise.resolve());
      const err = new Error('card declined');
      await expect(settler.fail(claim, run, err)).resolves.toBeUndefined();
      expect(run.abandon).toHaveBeenCalledWith(err);
      expect(service.release).toHaveBeenCalledWith(claim);
      expect(leases.unhold).toHaveBeenCalledWith(claim);
    });

    it("a phase's serialization conflict is answered 503 (retry) rather than with the driver's error, for a retry that resumes there", async () => {
      const { settler, service } = settlerWith();
      const answer = await settler.fail(
        claim,
        runThat(() => Promise.resolve()),
        sqlError('40001'),
      );
      expect(answer?.code).toBe('not-committed');
      expect(service.release).toHaveBeenCalledWith(claim);
    });

    it('a lost lease is answered 409 (timed out) and keeps the key for the request that took it over', async () => {
      const { settler, service, leases } = settlerWith();
      const answer = await settler.fail(
        claim,
        runThat(() => Promise.resolve()),
        new LeaseLost('gone'),
      );
      expect(answer?.code).toBe('transaction-timed-out');
      expect(answer?.message).toContain('idempotency-key');
      expect(service.release).not.toHaveBeenCalled();
      expect(leases.unhold).toHaveBeenCalledWith(claim);
    });

    it('lets the lease go even when freeing the key fails', async () => {
      const { settler, service, leases } = settlerWith();
      service.release.mockImplementation(() => Promise.reject(new Error('store down')));
      await expect(
        settler.fail(
          claim,
          runThat(() => Promise.resolve()),
          new Error('x'),
        ),
      ).rejects.toThrow('store down');
      expect(leases.unhold).toHaveBeenCalledWith(claim);
    });
  });

  it('giveUp warns, fails a waiting finish() with the same words, and frees the key as not stored', async () => {
    const { settler, service, leases } = settlerWith();
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      const run = runThat(() => Promise.resolve());
      await settler.giveUp(claim, run, 'was streamed');
      const words = 'Pay.create: response not stored: the handler was streamed; the key is released';
      expect(warn).toHaveBeenCalledWith(words);
      expect((run.abandon.mock.calls[0][0] as Error).message).toBe(words);
      expect(service.release).toHaveBeenCalledWith(claim, 'not-stored');
      expect(leases.unhold).toHaveBeenCalledWith(claim);
    } finally {
      warn.mockRestore();
    }
  });
});
