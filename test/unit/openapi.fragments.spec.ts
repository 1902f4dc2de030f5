import { describe, expect, it } from '@jest/globals';
import { displayName, duration, routeDoc } from '../../lib/ops/openapi/openapi.fragments.js';
import { resolvedRoute } from '../support/claims.js';
import { createProtocol } from '../support/protocol.js';
import type { ResolvedRouteOptions } from '../../lib/shared/interfaces/resolved-options.interface.js';

const route = (over: Partial<ResolvedRouteOptions> = {}) => resolvedRoute({ ttlMs: 86_400_000, ...over });

describe('OpenAPI fragments', () => {
  it('spells header names as documents do', () => {
    expect(displayName('idempotency-key')).toBe('Idempotency-Key');
    expect(displayName('x-request-key')).toBe('X-Request-Key');
    expect(displayName('key')).toBe('Key');
    expect(displayName('x-9a')).toBe('X-9a');
    expect(displayName('x--y')).toBe('X--Y');
  });

  it('writes a duration in the largest unit that divides it', () => {
    expect(duration(86_400_000)).toBe('1 day');
    expect(duration(172_800_000)).toBe('2 days');
    expect(duration(3_600_000)).toBe('1 hour');
    expect(duration(5_400_000)).toBe('90 minutes');
    expect(duration(90_000)).toBe('90 seconds');
    expect(duration(1000)).toBe('1 second');
    expect(duration(1500)).toBe('1500 milliseconds');
    expect(duration(1)).toBe('1 millisecond');
    expect(duration(31_536_000_000)).toBe('365 days');
  });

  it('describes the key header by the options: required, length, the characters the key rules allow', () => {
    const { options } = createProtocol({ maxKeyLength: 40 });
    const doc = routeDoc(options, route());
    expect(doc.header).toEqual({
      name: 'Idempotency-Key',
      required: true,
      description:
        'Unique per operation, the same on every retry of it, for 1 day; a UUID does. A Structured Field String ("…") is the same key unquoted.',
      schema: { type: 'string', minLength: 1, maxLength: 40, pattern: '^[^\\u0000-\\u0020\\u007F]+$' },
      example: '8e03978e-40d5-43e8-bc93-6894a57f9324',
    });
    expect(routeDoc(options, route({ missingHeader: 'pass-through' })).header.required).toBe(false);
    const pattern = new RegExp(doc.header.schema.pattern as string);
    expect(pattern.test(doc.header.example)).toBe(true);
    for (const bad of ['a b', 'a\tb', 'a\x7fb', '']) expect(pattern.test(bad)).toBe(false);
    expect(pattern.test('"quoted"')).toBe(true);
  });

  it('lists the four errors with the bodies the module sends, Retry-After on 409 and 503', () => {
    const doc = routeDoc(createProtocol({}).options, route());
    expect(doc.errors.map((e) => [e.status, Object.keys(e.headers)])).toEqual([
      [400, []],
      [409, ['Retry-After']],
      [422, []],
      [503, ['Retry-After']],
    ]);
    expect(doc.errors[0].content).toEqual({
      'application/json': {
        schema: { type: 'object', required: ['error'], properties: { error: { type: 'string' } } },
        example: { error: 'idempotency-key header is required' },
      },
    });
    expect(doc.successHeaders).toEqual({
      'Idempotent-Replayed': {
        description: 'Present (`true`) when this is the stored response of an earlier request with the same key, replayed.',
        schema: { type: 'string', enum: ['true'] },
      },
    });
    expect(doc.errorHeaders).toEqual({});
  });

  it('follows replayedHeader: false, the body flag and the echo', () => {
    const none = routeDoc(createProtocol({ replayedHeader: false }).options, route());
    expect(none.successHeaders).toEqual({});
    expect(none.policy).toContain('gets its stored response again, without running it twice');
    const body = routeDoc(createProtocol({ replayFlag: 'body', echoKeyHeader: true }).options, route({ ttlMs: 60_000 }));
    expect(Object.keys(body.successHeaders)).toEqual(['Idempotency-Key']);
    expect(Object.keys(body.errorHeaders)).toEqual(['Idempotency-Key']);
    expect(body.policy).toMatch(
      /Keys expire 1 minute after the response is stored\. A replayed JSON object body has `"replayed": true` added\.$/,
    );
  });
});
