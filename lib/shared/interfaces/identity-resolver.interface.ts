import type { ExecutionContext, Type } from '@nestjs/common';

/**
 * Resolves the caller's scope, folded into the store key so that one caller's stored response is
 * never replayed to another. Runs after guards, so it sees what they put on the request (`req.user`).
 * Return an ID, not free text: the result obeys the same rules as the header (length, no control
 * characters or spaces).
 */
// `any`: the adapter's request (Express or Fastify) with whatever the application's guards put on it.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type IdentityFunction = (request: any, context: ExecutionContext) => string | Promise<string>;

/** An injectable class resolver, for scopes that need services (resolved from the application's container). */
export interface IdempotencyIdentityResolver {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- as for IdentityFunction
  resolve(request: any, context: ExecutionContext): string | Promise<string>;
}

/** A function, or the class of an injectable {@link IdempotencyIdentityResolver}. */
export type IdempotencyIdentity = IdentityFunction | Type<IdempotencyIdentityResolver>;
