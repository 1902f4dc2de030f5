import type { IdempotencyStore } from './idempotency-store.interface.js';
import type {
  AbandonedRuns,
  HealthCheck,
  Inspection,
  RecoveryPoints,
  TransactionalCompletion,
} from './store-capabilities.interface.js';

const fn = (value: unknown): boolean => typeof value === 'function';

/** Whether `store` serves `transactional: true` routes and inboxes. */
export function completesInTransactions(store: IdempotencyStore): store is IdempotencyStore & TransactionalCompletion {
  return fn(store.completeIn);
}

/** Whether `store` keeps recovery points, so it serves `atomicPhases` routes. */
export function keepsRecoveryPoints(store: IdempotencyStore): store is IdempotencyStore & RecoveryPoints {
  return fn(store.recoveryPoint) && fn(store.advanceIn) && fn(store.finishIn);
}

/** Whether a completer can find and resume abandoned runs on `store`. */
export function findsAbandonedRuns(store: IdempotencyStore): store is IdempotencyStore & RecoveryPoints & AbandonedRuns {
  return keepsRecoveryPoints(store) && fn(store.abandonedRuns);
}

/** Whether `store` answers a health check. */
export function answersPing(store: IdempotencyStore): store is IdempotencyStore & HealthCheck {
  return fn(store.ping);
}

/** Whether `store` lets an operator read or delete a key (`method`: what the admin is asked to do). */
export function inspects(
  store: IdempotencyStore,
  method: keyof Inspection,
): store is IdempotencyStore & Pick<Inspection, typeof method> {
  return fn(store[method]);
}
