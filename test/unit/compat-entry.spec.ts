import { describe, expect, it } from '@jest/globals';
import type { Type } from '@nestjs/common';
import * as compat from '../../lib/compat/index.js';
import type {
  ErrorFormat,
  FingerprintFunction,
  FingerprintMode,
  IdempotencyErrorInfo,
  IdempotencyEventsOption,
  IdempotencyIdentity,
  IdempotencyModuleRootOptions,
  IdempotencyOutcome,
  IdentityFunction,
  InFlightPolicy,
  MessageKeyFunction,
  MessageScopeFunction,
  MissingHeaderPolicy,
  ReplayFlag,
} from '../../lib/compat/index.js';
import {
  IdempotencyModule,
  InMemoryStore,
  RedisStore,
  type IdempotencyErrorBody,
  type IdempotencyEvent,
  type IdempotencyModuleOptions,
  type IdempotentOptions,
} from '../../lib/index.js';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../../lib/shared/idempotency.constants.js';

// Each deprecated type's TSDoc says what to write instead; these are those very expressions, and the
// build fails if one of them is not the same type.
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const same = <A, B>(ok: Same<A, B>) => ok;

describe('nestjs-idempotency/compat', () => {
  it('each deprecated type is what its TSDoc says to write instead', () => {
    const checks = [
      same<ErrorFormat, NonNullable<IdempotencyModuleOptions['errorFormat']>>(true),
      same<FingerprintFunction, Extract<IdempotentOptions['fingerprint'], (...args: never[]) => unknown>>(true),
      same<FingerprintMode, NonNullable<IdempotentOptions['fingerprint']>>(true),
      same<InFlightPolicy, NonNullable<IdempotentOptions['inFlight']>>(true),
      same<MessageKeyFunction, NonNullable<IdempotentOptions['keyFrom']>>(true),
      same<MessageScopeFunction, NonNullable<IdempotentOptions['scope']>>(true),
      same<MissingHeaderPolicy, NonNullable<IdempotentOptions['missingHeader']>>(true),
      same<ReplayFlag, NonNullable<IdempotencyModuleOptions['replayFlag']>>(true),
      same<IdempotencyModuleRootOptions, NonNullable<Parameters<typeof IdempotencyModule.forRoot>[0]>>(true),
      same<IdempotencyErrorInfo, Parameters<IdempotencyErrorBody>[0]>(true),
      same<IdempotencyEventsOption, NonNullable<IdempotencyModuleOptions['events']>>(true),
      same<IdempotencyOutcome, IdempotencyEvent['outcome']>(true),
      same<IdempotencyIdentity, NonNullable<IdempotencyModuleOptions['identity']>>(true),
      same<IdentityFunction, Extract<IdempotencyModuleOptions['identity'], (...args: never[]) => unknown>>(true),
      // And the check itself tells two different types apart.
      same<ReplayFlag, ErrorFormat>(false),
      same<IdentityFunction, Type<unknown>>(false),
    ];
    expect(checks).toEqual([...Array<boolean>(14).fill(true), false, false]);
  });

  it('the deprecated values are the classes and the token of the root entry', () => {
    expect(new compat.InMemoryCache()).toBeInstanceOf(InMemoryStore);
    expect(compat.RedisCache.prototype).toBe(RedisStore.prototype);
    expect(compat.IDEMPOTENCY_MODULE_OPTIONS).toBe(IDEMPOTENCY_MODULE_OPTIONS);
    expect(typeof compat.RedisCacheOptions.create).toBe('function');
  });
});
