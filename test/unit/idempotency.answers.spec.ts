import { describe, expect, it } from '@jest/globals';
import { errorResponse } from '../../lib/idempotency.answers.js';
import { PROBLEM_TITLES } from '../../lib/idempotency.messages.js';
import { IdempotencyException } from '../../lib/index.js';

const json = { errorFormat: 'json', problemTypeBaseUrl: 'urn:x:' } as const;
const problem = { errorFormat: 'problem+json', problemTypeBaseUrl: 'https://api.example.com/p/' } as const;

describe('errorResponse', () => {
  const busy = new IdempotencyException(409, 'busy; retry', { 'retry-after': '1' }, 'key-in-flight');

  it('writes {"error": sentence} as JSON by default, with the exception\'s headers', () => {
    const res = errorResponse(busy, json);
    expect(res.status).toBe(409);
    expect(res.headers).toEqual({ 'content-type': 'application/json; charset=utf-8', 'retry-after': '1' });
    expect(res.body.toString()).toBe('{"error":"busy; retry"}');
  });

  it('writes RFC 9457 problem details: type from the base and the code, the title of the type, status, the sentence as detail', () => {
    const res = errorResponse(busy, problem);
    expect(res.status).toBe(409);
    expect(res.headers).toEqual({ 'content-type': 'application/problem+json', 'retry-after': '1' });
    expect(res.body.toString()).toBe(
      '{"type":"https://api.example.com/p/key-in-flight","title":"A request is outstanding for this Idempotency-Key","status":409,"detail":"busy; retry"}',
    );
  });

  it("gives an exception without a code (an application's own) about:blank and the status text", () => {
    const res = errorResponse(new IdempotencyException(503, 'down'), problem);
    expect(JSON.parse(res.body.toString())).toEqual({
      type: 'about:blank',
      title: 'Service Unavailable',
      status: 503,
      detail: 'down',
    });
  });

  it('has a title for every code, the draft’s three among them', () => {
    expect(PROBLEM_TITLES['key-missing']).toBe('Idempotency-Key is missing');
    expect(PROBLEM_TITLES['key-reused']).toBe('Idempotency-Key is already used');
    expect(PROBLEM_TITLES['key-in-flight']).toBe('A request is outstanding for this Idempotency-Key');
    for (const [code, title] of Object.entries(PROBLEM_TITLES)) {
      expect(code).toMatch(/^[a-z]+(-[a-z]+)+$/);
      expect(title.length).toBeGreaterThan(10);
    }
  });
});
