import { describe, expect, it } from '@jest/globals';
import { InMemoryStore, PostgresStore, RedisStore, SqliteStore } from '../../lib/index.js';
import type { IdempotencyStore } from '../../lib/stores/contract/idempotency-store.interface.js';
import {
  answersPing,
  completesInTransactions,
  findsAbandonedRuns,
  inspects,
  keepsRecoveryPoints,
} from '../../lib/stores/contract/store.capabilities.js';

const no = (): Promise<never> => Promise.reject(new Error('not called'));
/** The four required steps, and `extra`: a store with exactly the capabilities given. */
const store = (extra: Record<string, unknown> = {}): IdempotencyStore => ({
  claim: no,
  commit: no,
  release: no,
  renew: no,
  ...extra,
});

/** What each capability guard says of a store. */
function capabilities(s: IdempotencyStore): string[] {
  const guards: Array<[string, (s: IdempotencyStore) => boolean]> = [
    ['transactions', completesInTransactions],
    ['recovery points', keepsRecoveryPoints],
    ['abandoned runs', findsAbandonedRuns],
    ['ping', answersPing],
    ['peek', (x) => inspects(x, 'peek')],
    ['forget', (x) => inspects(x, 'forget')],
  ];
  return guards.filter(([, guard]) => guard(s)).map(([name]) => name);
}

describe('store capabilities (stores/contract)', () => {
  it('a store of the four fenced steps has none', () => {
    expect(capabilities(store())).toEqual([]);
  });

  it('a capability is all of its methods: recovery points need recoveryPoint, advanceIn and finishIn; abandoned runs need them too', () => {
    const points = { recoveryPoint: no, advanceIn: no, finishIn: no };
    expect(capabilities(store(points))).toEqual(['recovery points']);
    expect(capabilities(store({ ...points, finishIn: undefined }))).toEqual([]);
    expect(capabilities(store({ abandonedRuns: no }))).toEqual([]);
    expect(capabilities(store({ ...points, abandonedRuns: no }))).toEqual(['recovery points', 'abandoned runs']);
  });

  it('a method is a function: a truthy value of another kind is not one', () => {
    expect(capabilities(store({ completeIn: true, ping: 'yes', peek: {}, forget: 1 }))).toEqual([]);
    expect(capabilities(store({ completeIn: no, ping: no, peek: no }))).toEqual(['transactions', 'ping', 'peek']);
  });

  it('what each shipped store has', () => {
    const of = (type: { prototype: object }) => capabilities(type.prototype as IdempotencyStore);
    expect(of(InMemoryStore)).toEqual(['ping', 'peek', 'forget']);
    expect(of(RedisStore)).toEqual(['ping', 'peek', 'forget']);
    expect(of(SqliteStore)).toEqual(['ping', 'peek', 'forget']);
    expect(of(PostgresStore)).toEqual(['transactions', 'recovery points', 'abandoned runs', 'ping', 'peek', 'forget']);
  });
});
