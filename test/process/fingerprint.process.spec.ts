import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { execFileSync } from 'node:child_process';
import { requestFingerprint } from '../../lib/shared/utils/fingerprint.util.js';
import { queryString, requestArbitrary, SEED } from '../support/arbitraries.js';
import { built } from '../support/build.js';

built('dist');

// Runs the built package (dist/, compiled on demand by test/support/build.ts) in another node process.
function fingerprintsElsewhere(inputs: unknown[][]): string[] {
  const script = `
    import { requestFingerprint } from './dist/shared/utils/fingerprint.util.js';
    let input = '';
    process.stdin.on('data', (d) => (input += d)).on('end', () => {
      process.stdout.write(JSON.stringify(JSON.parse(input).map(([m, u, b]) => requestFingerprint(m, u, b, 'Pay.create'))));
    });`;
  return JSON.parse(
    execFileSync(process.execPath, ['--input-type=module', '-e', script], { input: JSON.stringify(inputs), encoding: 'utf8' }),
  );
}

describe('the fingerprint across processes', () => {
  it('is the same for a reordered query and body in another process', () => {
    const here = requestFingerprint(
      'POST',
      '/api/payments?b=2&a=1',
      { amount: 100, currency: 'EUR', tags: ['a', 'b'], meta: { z: 1, a: 'ü' } },
      'Pay.create',
    );
    const [there] = fingerprintsElsewhere([
      ['POST', '/api/payments?a=1&b=2', { meta: { a: 'ü', z: 1 }, tags: ['a', 'b'], currency: 'EUR', amount: 100 }],
    ]);
    expect(there).toBe(here);
    expect(here).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('property: every generated request fingerprints identically in a separate process', () => {
    const samples = fc.sample(
      fc.record({ method: fc.constantFrom('POST', 'PUT', 'PATCH', 'DELETE'), request: requestArbitrary }),
      {
        seed: SEED,
        numRuns: 200,
      },
    );
    const inputs = samples.map((s) => [s.method, `/echo/${s.request.id}?${queryString(s.request.pairs)}`, s.request.body]);
    const here = inputs.map(([m, u, b]) => requestFingerprint(m as string, u as string, b, 'Pay.create'));
    expect(fingerprintsElsewhere(inputs)).toEqual(here);
    // Distinct requests, distinct fingerprints (up to reordering, which the generator does not do here).
    expect(new Set(here).size).toBe(new Set(inputs.map((i) => JSON.stringify(i))).size);
  });
});
