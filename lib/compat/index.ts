// The `nestjs-idempotency/compat` entry: the names of 0.x that left the root entry, each still working
// until 1.0. Values warn once when used; types are marked deprecated, so an editor strikes them through
// and says what to write instead. CHANGELOG.md lists where each name went.

import type {
  ErrorFormat as ErrorFormatType,
  FingerprintFunction as FingerprintFunctionType,
  FingerprintMode as FingerprintModeType,
  InFlightPolicy as InFlightPolicyType,
  MessageKeyFunction as MessageKeyFunctionType,
  MessageScopeFunction as MessageScopeFunctionType,
  MissingHeaderPolicy as MissingHeaderPolicyType,
  ReplayFlag as ReplayFlagType,
} from '../shared/interfaces/idempotent-options.interface.js';
import type { IdempotencyModuleRootOptions as RootOptionsType } from '../shared/interfaces/idempotency-module-options.interface.js';
import type { ResolvedIdempotencyOptions as ResolvedOptionsType } from '../shared/interfaces/resolved-options.interface.js';
import type { IdempotencyErrorInfo as ErrorInfoType } from '../shared/interfaces/idempotency-error.interface.js';
import type {
  IdempotencyEventsOption as EventsOptionType,
  IdempotencyOutcome as OutcomeType,
} from '../shared/interfaces/idempotency-event.interface.js';
import type {
  IdempotencyIdentity as IdentityType,
  IdentityFunction as IdentityFunctionType,
} from '../shared/interfaces/identity-resolver.interface.js';
import type { CompleterOptions as CompleterOptionsType } from '../shared/interfaces/idempotency-module-options.interface.js';
import type { IdempotencyHealthResult as HealthResultType } from '../ops/health/idempotency.health-indicator.js';
import { IDEMPOTENCY_MODULE_OPTIONS as OPTIONS_TOKEN } from '../shared/idempotency.constants.js';

export { InMemoryCache, RedisCache } from './store.aliases.js';
export type { InMemoryCacheOptions } from './store.aliases.js';
export { RedisCacheOptions } from '../stores/redis/redis-cache.options.js';

/** @deprecated Write `NonNullable<IdempotencyModuleOptions['errorFormat']>` (from `nestjs-idempotency`). */
export type ErrorFormat = ErrorFormatType;
/** @deprecated Write `Extract<IdempotentOptions['fingerprint'], (...args: never[]) => unknown>`. */
export type FingerprintFunction = FingerprintFunctionType;
/** @deprecated Write `NonNullable<IdempotentOptions['fingerprint']>`. */
export type FingerprintMode = FingerprintModeType;
/** @deprecated Write `NonNullable<IdempotentOptions['inFlight']>`. */
export type InFlightPolicy = InFlightPolicyType;
/** @deprecated Write `NonNullable<IdempotentOptions['keyFrom']>`. */
export type MessageKeyFunction = MessageKeyFunctionType;
/** @deprecated Write `NonNullable<IdempotentOptions['scope']>`. */
export type MessageScopeFunction = MessageScopeFunctionType;
/** @deprecated Write `NonNullable<IdempotentOptions['missingHeader']>`. */
export type MissingHeaderPolicy = MissingHeaderPolicyType;
/** @deprecated Write `NonNullable<IdempotencyModuleOptions['replayFlag']>`. */
export type ReplayFlag = ReplayFlagType;
/** @deprecated Write `NonNullable<Parameters<typeof IdempotencyModule.forRoot>[0]>`. */
export type IdempotencyModuleRootOptions = RootOptionsType;
/** @deprecated Write `Parameters<IdempotencyErrorBody>[0]`. */
export type IdempotencyErrorInfo = ErrorInfoType;
/** @deprecated Write `NonNullable<IdempotencyModuleOptions['events']>`. */
export type IdempotencyEventsOption = EventsOptionType;
/** @deprecated Write `IdempotencyEvent['outcome']`. */
export type IdempotencyOutcome = OutcomeType;
/** @deprecated Write `NonNullable<IdempotencyModuleOptions['identity']>`. */
export type IdempotencyIdentity = IdentityType;
/** @deprecated Write `Extract<IdempotencyModuleOptions['identity'], (...args: never[]) => unknown>`. */
export type IdentityFunction = IdentityFunctionType;
/** @deprecated Write `NonNullable<IdempotencyModuleOptions['completer']>`. */
export type CompleterOptions = CompleterOptionsType;
/** @deprecated Write `Awaited<ReturnType<IdempotencyHealthIndicator['isHealthy']>>`. */
export type IdempotencyHealthResult<Key extends string = string> = HealthResultType<Key>;
/**
 * @deprecated The module's resolved options are its own and change shape between releases: inject
 * your configuration (the object you gave `forRoot()`, or your `ConfigService`) instead.
 */
export type ResolvedIdempotencyOptions = ResolvedOptionsType;
/** @deprecated See {@link ResolvedIdempotencyOptions}: the token of the module's resolved options. */
export const IDEMPOTENCY_MODULE_OPTIONS = OPTIONS_TOKEN;
