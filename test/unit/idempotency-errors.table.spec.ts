import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { IDEMPOTENCY_ERRORS } from '../../lib/shared/exceptions/idempotency-errors.table.js';
import { IdempotencyException } from '../../lib/index.js';
import { PROBLEM_TITLES } from '../../lib/shared/messages/client.messages.js';

/** The rows of docs/standards.md's table of error codes: code, status, Retry-After, title. */
function documented(): string[][] {
  return readFileSync('docs/standards.md', 'utf8')
    .split('\n')
    .map((line) => /^\s*\| `([a-z-]+)` +\| ([^|]+?) +\| (yes|no) +\| ([^|]+?) +\|$/.exec(line)?.slice(1))
    .filter((row): row is string[] => row !== undefined);
}

describe('the errors table', () => {
  it('docs/standards.md lists every code with its status, Retry-After and problem title, and nothing else', () => {
    const table = Object.entries(IDEMPOTENCY_ERRORS).map(([code, { status, retryAfter }]) => [
      code,
      status === undefined ? "the response's" : String(status),
      retryAfter ? 'yes' : 'no',
      PROBLEM_TITLES[code as keyof typeof PROBLEM_TITLES],
    ]);
    expect(documented().sort()).toEqual(table.sort());
  });

  it('of(code) answers with the status and Retry-After of the code, and the given sentence', () => {
    for (const [code, { status, retryAfter }] of Object.entries(IDEMPOTENCY_ERRORS)) {
      const err = IdempotencyException.of(code as keyof typeof IDEMPOTENCY_ERRORS, 'a sentence', 207);
      expect([err.code, err.getStatus(), err.headers, err.reason]).toEqual([
        code,
        status ?? 207,
        retryAfter ? { 'retry-after': '1' } : {},
        'a sentence',
      ]);
    }
  });
});
