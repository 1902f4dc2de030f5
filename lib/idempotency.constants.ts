/** DI token of the resolved {@link IdempotencyModuleOptions}. */
export const IDEMPOTENCY_MODULE_OPTIONS = Symbol('IDEMPOTENCY_MODULE_OPTIONS');

/** Metadata key under which `@Idempotent()` stores its per-route options. */
export const IDEMPOTENT_ROUTE_METADATA = 'nestjs-idempotency:route';

/**
 * Where the interceptor leaves the validated key for `@IdempotencyKey()`.
 * A symbol, so it cannot clash with anything a framework or app puts on the request.
 */
export const IDEMPOTENCY_KEY_PROPERTY = Symbol('nestjs-idempotency:key');

/** Header added to every replayed response (the Stripe convention). */
export const REPLAYED_HEADER = 'idempotent-replayed';

export const DEFAULT_TTL_MS = 86_400_000;
export const DEFAULT_LEASE_MS = 60_000;
export const DEFAULT_HEADER_NAME = 'idempotency-key';
export const DEFAULT_KEY_PREFIX = 'idem:';
export const DEFAULT_MAX_KEY_LENGTH = 255;
export const DEFAULT_MAX_SCOPE_LENGTH = 255;

/**
 * Metadata keys of @nestjs/common (stable strings of its `constants.js`). They are read, not written,
 * to refuse handlers at bootstrap whose responses cannot be captured; `@nestjs/common/internal`
 * exports them too, but is marked as not for use outside Nest.
 */
export const NEST_ROUTE_ARGS_METADATA = '__routeArguments__';
export const NEST_RESPONSE_PASSTHROUGH_METADATA = '__responsePassthrough__';
export const NEST_SSE_METADATA = '__sse__';
/** `RouteParamtypes.RESPONSE` and `RouteParamtypes.NEXT`. */
export const NEST_RESPONSE_PARAM_TYPES: readonly number[] = [1, 2];
