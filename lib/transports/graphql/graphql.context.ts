import type { IdempotencyContext } from '../../shared/interfaces/idempotency-context.interface.js';
import type { ResolvedRouteOptions } from '../../shared/interfaces/resolved-options.interface.js';
import { requestFingerprint } from '../../shared/utils/fingerprint.util.js';
import { surfaceScope } from '../../shared/utils/key.util.js';

/** What the fingerprint calls a mutation where an HTTP request has its method. */
const MUTATION = 'MUTATION';

/**
 * A GraphQL mutation as the protocol reads it: the key came with the GraphQL request (its header, or
 * an argument), the fingerprint is the mutation's field and arguments — not the document, so the
 * same mutation in another operation or with other selected fields is the same call — and there is
 * no response to write on (the resolver returns the replay; errors are GraphQL errors).
 */
export class GraphqlContext implements IdempotencyContext {
  readonly method = undefined;

  constructor(
    private readonly key: string | undefined,
    private readonly field: string,
    private readonly args: unknown,
    private readonly scoped: (route: ResolvedRouteOptions) => string | Promise<string>,
    /** The key came in the request's key header, not in an argument (`keyFrom`). */
    readonly headerKey = true,
  ) {}

  sentKey(): string | undefined {
    return this.key;
  }

  check(): void {
    // The arguments are parsed values: there is no unread body to refuse.
  }

  /** The caller's scope, then the mutation's: several mutations of one document may share the key header. */
  scope(route: ResolvedRouteOptions): string | Promise<string> {
    const caller = this.scoped(route);
    return typeof caller === 'string'
      ? surfaceScope(caller, 'graphql', route.id)
      : caller.then((scope) => surfaceScope(scope, 'graphql', route.id));
  }

  fingerprint(route: ResolvedRouteOptions): string {
    return requestFingerprint(MUTATION, this.field, this.args, route.id);
  }

  matches(stored: string, fingerprint: string): boolean {
    return stored === fingerprint;
  }

  answer(): void {
    // Nothing to write on: the runner returns the replay and throws GraphQL errors.
  }
}
