import { describe, expect, it } from '@jest/globals';
import { CompleterBackoff } from '../../lib/core/phases/completer.backoff.js';

describe('CompleterBackoff', () => {
  it('after each failure the next try waits a pause that doubles from idleMs, up to an hour; the maxAttempts-th failure is the last', () => {
    const backoff = new CompleterBackoff(60_000, 8);
    const t0 = 1_000_000_000;
    expect(backoff.due('k', t0)).toBe(true);
    const pauses: number[] = [];
    let now = t0;
    for (let attempt = 1; attempt <= 8; attempt++) {
      expect(backoff.failed('k', now)).toBe(attempt === 8);
      let pause = 0;
      // The first moment it is due again, found by halving: no fixed list of what the pauses are.
      for (let step = 2 ** 32; step >= 1; step /= 2) if (!backoff.due('k', now + pause + step - 1)) pause += step;
      pauses.push(pause);
      now += pause;
    }
    expect(pauses.slice(0, 7)).toEqual([60_000, 120_000, 240_000, 480_000, 960_000, 1_920_000, 3_600_000]);
    // Left for good after the eighth: never due again in this process.
    expect(backoff.due('k', now + 10 * 3_600_000)).toBe(false);
    // Another run is untouched; an ended run is forgotten.
    expect(backoff.due('other', t0)).toBe(true);
    backoff.ended('k');
    expect(backoff.due('k', t0)).toBe(true);
  });

  it('waits at least a second after a failure even with idleMs 0, and forgets the oldest of 10 000 runs first', () => {
    const backoff = new CompleterBackoff(0, 3);
    backoff.failed('first', 0);
    expect(backoff.due('first', 999)).toBe(false);
    expect(backoff.due('first', 1_000)).toBe(true);
    for (let i = 0; i < 10_000; i++) backoff.failed(`filler-${i}`, 0);
    expect(backoff.due('first', 500)).toBe(true);
    expect(backoff.due('filler-9999', 500)).toBe(false);
  });
});
