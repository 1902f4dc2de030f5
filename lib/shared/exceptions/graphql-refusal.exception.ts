import { IntrinsicException } from '@nestjs/common';
import { errorExtensions, type IdempotencyErrorExtensions } from './error-extensions.js';
import type { IdempotencyException } from './idempotency.exception.js';

/**
 * The module's refusal of a GraphQL mutation. GraphQL servers (graphql-js, under Apollo and
 * Mercurius) copy an error's `extensions` into the error they report, so no `graphql` import is
 * needed; as an `IntrinsicException` it is not logged by Nest as an unexpected error (a 409 is an
 * answer, not a fault); its stack is its sentence alone, since Apollo outside production puts a stack
 * in `extensions.stacktrace` and the module's answers carry no file paths.
 */
export class GraphqlRefusal extends IntrinsicException {
  readonly extensions: IdempotencyErrorExtensions;

  constructor(err: IdempotencyException) {
    super(err.reason);
    this.name = 'GraphQLError';
    this.extensions = errorExtensions(err);
    Object.defineProperty(this, 'stack', { value: `GraphQLError: ${err.reason}` });
  }
}
