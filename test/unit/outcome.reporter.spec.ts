import { describe, expect, it } from '@jest/globals';
import { HttpException } from '@nestjs/common';
import type { IdempotencyObserver, OutcomeFacts } from '../../lib/core/events/idempotency.observer.js';
import { OutcomeReporter } from '../../lib/core/events/outcome.reporter.js';
import { IdempotentReplay } from '../../lib/shared/exceptions/idempotent-replay.exception.js';
import { IdempotencyException } from '../../lib/index.js';
import { activeClaim } from '../support/claims.js';

/** A reporter on an observer that records what it is asked to emit. */
function reporter(enabled = true) {
  const emitted: [string, OutcomeFacts][] = [];
  const observer = { enabled, emit: (outcome: string, facts: OutcomeFacts) => void emitted.push([outcome, facts]) };
  return { emitted, reporter: new OutcomeReporter(observer as unknown as IdempotencyObserver) };
}

const facts = { route: 'Pay.create', method: 'POST', storeMs: 2, key: 'k' };

describe('OutcomeReporter', () => {
  it("reports the claim step's replays and the module's own answers by the outcome of their code", () => {
    const { emitted, reporter: r } = reporter();
    r.answered(new IdempotentReplay({ status: 201, headers: {}, body: Buffer.alloc(0) }), facts);
    for (const code of [
      'key-in-flight',
      'key-reused',
      'store-unavailable',
      'record-unreadable',
      'shutting-down',
      'key-missing',
    ] as const) {
      r.answered(IdempotencyException.of(code, 'why'), facts);
    }
    expect(emitted.map(([outcome, f]) => [outcome, f.status, f.code])).toEqual([
      ['replayed', 201, undefined],
      ['conflict', 409, 'key-in-flight'],
      ['mismatch', 422, 'key-reused'],
      ['store-unavailable', 503, 'store-unavailable'],
      ['store-unavailable', 503, 'record-unreadable'],
      ['store-unavailable', 503, 'shutting-down'],
      ['rejected', 400, 'key-missing'],
    ]);
    expect(emitted[0][1]).toEqual({ ...facts, status: 201 });
  });

  it("reports nothing for an application's own error, Nest's or not", () => {
    const { emitted, reporter: r } = reporter();
    r.answered(new HttpException('who?', 401), facts);
    r.answered(new Error('broken'), facts);
    expect(emitted).toEqual([]);
  });

  it("reports what a claimed request came to, with the status and code of the module's answer when it gave one", () => {
    const { emitted, reporter: r } = reporter();
    const claim = activeClaim({ storeMs: 3 });
    r.settled(claim, 'executed', 201);
    r.settled(claim, 'not-stored', IdempotencyException.of('transaction-timed-out', 'late'));
    r.settled(claim, 'released');
    const base = { route: 'Pay.create', method: 'POST', storeMs: 3, key: 'k' };
    expect(emitted).toEqual([
      ['executed', { ...base, status: 201, code: undefined }],
      ['not-stored', { ...base, status: 409, code: 'transaction-timed-out' }],
      ['released', { ...base, status: undefined, code: undefined }],
    ]);
  });

  it('reports nothing a claimed request came to while nothing observes outcomes', () => {
    const { emitted, reporter: r } = reporter(false);
    r.settled(activeClaim(), 'executed', 201);
    expect(emitted).toEqual([]);
  });
});
