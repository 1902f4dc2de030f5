import { describe, expect, it } from '@jest/globals';
import { Body } from '@nestjs/common';
import { IdempotencyKey, Idempotent } from '../../lib/index.js';
import { IDEMPOTENT_ROUTE_METADATA } from '../../lib/shared/idempotency.constants.js';
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
      settling: 'commit',
      waitMs: 0,
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

  it('marks the handlers that take @IdempotencyKey(), own, inherited or wrapped, and no other', () => {
    const { routes } = setup();
    class Payments {
      @Idempotent()
      pay(@Body() _body: unknown, @IdempotencyKey() _key: string) {}

      @Idempotent()
      refund(@Body() _body: unknown) {}
    }
    class CardPayments extends Payments {
      @Idempotent()
      capture(@IdempotencyKey() _key: string) {}
    }
    // A decorator that wraps the method: the function Nest calls is named after the wrapper.
    class Wrapped {
      @Idempotent()
      settle(@IdempotencyKey() _key: string) {}
    }
    const original = Object.getOwnPropertyDescriptor(Wrapped.prototype, 'settle')!.value as () => void;
    const wrapper = function traced(this: unknown) {
      return original.call(this);
    };
    Reflect.defineMetadata(IDEMPOTENT_ROUTE_METADATA, {}, wrapper);
    Object.defineProperty(Wrapped.prototype, 'settle', { value: wrapper });
    expect(routes.resolve(Payments, Payments.prototype.pay).readsKey).toBe(true);
    expect(routes.resolve(Payments, Payments.prototype.refund).readsKey).toBeUndefined();
    // Inherited: found on the parent's prototype (a registry of its own, as each handler is cached).
    const inherited = setup().routes;
    expect(inherited.resolve(CardPayments, CardPayments.prototype.pay).readsKey).toBe(true);
    expect(inherited.resolve(CardPayments, CardPayments.prototype.refund).readsKey).toBeUndefined();
    expect(routes.resolve(CardPayments, CardPayments.prototype.capture).readsKey).toBe(true);
    expect(routes.resolve(Wrapped, wrapper).readsKey).toBe(true);
    // A handler that is no method of the class (nothing to look up) takes no key.
    const loose = () => undefined;
    expect(routes.resolve(Payments, loose).readsKey).toBeUndefined();
  });
});
