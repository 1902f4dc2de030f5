import assert from 'node:assert/strict';
import type { IdempotencyRecord } from '../stores/contract/idempotency-store.interface.js';

/** Binary, newlines and non-ASCII: what a store must keep byte for byte. */
export const sampleRecord = (fingerprint: string): IdempotencyRecord => ({
  fingerprint,
  response: {
    status: 402,
    headers: { 'content-type': 'application/octet-stream', location: '/p/1', 'x-multi': ['a', 'b'], 'x-text': 'ü\n?' },
    body: Buffer.from([0, 10, 13, 0x52, 0x43, 0xff, 0xfe, 10, 0x7b]),
  },
});

/** Within 1.5 s of when it should be: the store's clock may be another machine's. */
export function near(actual: number, expected: number, what: string): void {
  assert.ok(Math.abs(actual - expected) < 1500, `${what} is ${actual}, ${actual - expected} ms from ${expected}`);
}

export const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Deep equality where an absent and an undefined property are the same, as stores may differ there. */
export function same(actual: unknown, expected: unknown, message?: string): void {
  const plain = (value: unknown): unknown =>
    value === null || typeof value !== 'object' || Buffer.isBuffer(value)
      ? value
      : Array.isArray(value)
        ? value.map(plain)
        : Object.fromEntries(
            Object.entries(value)
              .filter(([, v]) => v !== undefined)
              .map(([k, v]) => [k, plain(v)]),
          );
  assert.deepStrictEqual(plain(actual), plain(expected), message);
}
