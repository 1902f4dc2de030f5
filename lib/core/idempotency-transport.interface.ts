import type { CallHandler, ExecutionContext } from '@nestjs/common';
import type { Observable } from 'rxjs';
import type { ResolvedRouteOptions } from '../shared/interfaces/resolved-options.interface.js';

/**
 * A surface `@Idempotent()` works on: the calls of one Nest execution-context type. It reads the key,
 * the scope and the fingerprint from its context and answers in its own terms (a response, a reply, a
 * GraphQL result, a delivery's ack); claiming, running under a lease and settling are the core's
 * (`IdempotencyService.begin`, `InboxRunner.run`), so a transport holds no claim or settle rule.
 *
 * A transport is one folder under `transports/` and one line in the module's list of transports.
 */
export interface IdempotencyTransport {
  /** `ExecutionContext.getType()` of the calls it serves: `'http'`, `'rpc'`, `'graphql'`, or a context type of its own. */
  readonly contextType: string;
  /** Runs one decorated call of that type: `next.handle()` at most once per key, or the stored answer. */
  handle(context: ExecutionContext, next: CallHandler, route: ResolvedRouteOptions): Promise<Observable<unknown>>;
  /**
   * For a transport whose handlers are provider methods rather than controller methods: whether this
   * decorated method is one of them. `@Idempotent()` on a provider method that no transport (and no
   * GraphQL resolver) claims fails the start, as it would otherwise deduplicate nothing.
   */
  handlesProviderMethod?(handler: (...args: never[]) => unknown): boolean;
}
