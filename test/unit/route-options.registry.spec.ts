import { describe, expect, it } from '@jest/globals';
import { IDEMPOTENT_ROUTE_METADATA } from '../../lib/idempotency.constants.js';
import { createProtocol as setup } from '../support/protocol.js';

describe('RouteOptionsRegistry', () => {
  it('reads @Idempotent() metadata once per handler and names the handler in errors', () => {
    const { routes } = setup({ ttlMs: 9 });
    const handler = () => undefined;
    Reflect.defineMetadata(IDEMPOTENT_ROUTE_METADATA, { ttlMs: 5 }, handler);
    class Pay {}
    const first = routes.resolve(Pay, handler);
    expect(first).toEqual({
      id: 'Pay.handler',
      ttlMs: 5,
      missingHeader: 'reject',
      fingerprint: 'canonical',
      fingerprintTag: '',
      identity: undefined,
      transactional: false,
      leaseMs: 60_000,
    });
    Reflect.defineMetadata(IDEMPOTENT_ROUTE_METADATA, { ttlMs: 6 }, handler);
    expect(routes.resolve(Pay, handler)).toBe(first);
    const other = () => undefined;
    expect(routes.resolve(Pay, other)).toMatchObject({ id: 'Pay.other', ttlMs: 9, missingHeader: 'reject', identity: undefined });
    const bad = () => undefined;
    Reflect.defineMetadata(IDEMPOTENT_ROUTE_METADATA, { ttlMs: -1 }, bad);
    expect(() => routes.resolve(Pay, bad)).toThrow('@Idempotent(): ttlMs must be an integer from 1 to 31536000000, got -1');
    const named = () => undefined;
    Reflect.defineMetadata(IDEMPOTENT_ROUTE_METADATA, { ttlMs: -1 }, named);
    expect(() => routes.resolve(Pay, named, '@Idempotent() on A.b()')).toThrow('@Idempotent() on A.b(): ttlMs');
  });

  it('tells decorated handlers from others, whatever options they carry', () => {
    const { routes } = setup();
    const plain = () => undefined;
    const bare = () => undefined;
    Reflect.defineMetadata(IDEMPOTENT_ROUTE_METADATA, {}, bare);
    expect(routes.isIdempotent(plain)).toBe(false);
    expect(routes.isIdempotent(bare)).toBe(true);
  });
});
