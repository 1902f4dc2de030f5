import { Injectable } from '@nestjs/common';
import { IdempotencyException } from '../../shared/exceptions/idempotency.exception.js';
import { IdempotentReplay } from '../../shared/exceptions/idempotent-replay.exception.js';
import type { ActiveClaim } from '../../shared/interfaces/active-claim.interface.js';
import type { IdempotencyErrorCode } from '../../shared/interfaces/idempotency-error.interface.js';
import type { IdempotencyOutcome } from '../../shared/interfaces/idempotency-event.interface.js';
import { IdempotencyObserver, type OutcomeFacts } from './idempotency.observer.js';

/** The outcome of the module's own answers but rejections (400, 415, 500). */
const OUTCOMES: Partial<Record<IdempotencyErrorCode, IdempotencyOutcome>> = {
  'key-in-flight': 'conflict',
  'key-reused': 'mismatch',
  'store-unavailable': 'store-unavailable',
  'record-unreadable': 'store-unavailable',
  'shutting-down': 'store-unavailable',
};

/** Says what each request came to, in the words of {@link IdempotencyOutcome}. */
@Injectable()
export class OutcomeReporter {
  constructor(private readonly observer: IdempotencyObserver) {}

  /** A request without a key on a route that passes such requests through. */
  bypassed(route: string, method: string | undefined): void {
    this.observer.emit('bypassed', { route, method });
  }

  /** What the claim step answered with (its errors and replays); an application's own error is not an outcome. */
  answered(err: unknown, facts: OutcomeFacts): void {
    if (err instanceof IdempotentReplay) {
      this.observer.emit('replayed', { ...facts, status: err.response.status });
    } else if (err instanceof IdempotencyException) {
      this.observer.emit(OUTCOMES[err.code!] ?? 'rejected', { ...facts, status: err.getStatus(), code: err.code });
    }
  }

  /**
   * What a claimed request came to, with the status and code of the module's answer when it gave one;
   * and duplicates waiting for its key are woken.
   */
  settled(claim: ActiveClaim, outcome: IdempotencyOutcome, answer?: number | IdempotencyException): void {
    // Every claim's fate passes here once, after its commit or release: the moment its waiters look again.
    claim.onSettled?.(claim.storeKey);
    if (!this.observer.enabled) return;
    const status = typeof answer === 'number' ? answer : answer?.getStatus();
    const { route, method, storeMs, key } = claim;
    this.observer.emit(outcome, {
      route,
      method,
      storeMs,
      key,
      status,
      code: typeof answer === 'object' ? answer.code : undefined,
    });
  }
}
