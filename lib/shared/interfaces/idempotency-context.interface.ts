import type { ResolvedRouteOptions } from './resolved-options.interface.js';

/**
 * One call as the core sees it, whatever carries it: an HTTP request
 * (`transports/http/http.context.ts`), a GraphQL mutation (`transports/graphql/graphql.context.ts`),
 * a message to a handler or through the inbox (`core/values/inbox.context.ts`). The core reads
 * nothing else of a call, and hands back what is not the handler's to answer through {@link answer}.
 */
export interface IdempotencyContext {
  /** What the call does, for events and metrics: the HTTP method; `undefined` outside HTTP (a message). */
  readonly method: string | undefined;
  /** The key as the caller sent it, before the key rules; `undefined` when none was sent. */
  sentKey(name: string): string | undefined;
  /**
   * Whether the key came in an HTTP header, where a Structured Field String (`"8e03978e"`) is the
   * same key unquoted. A message id or an argument is taken as it is: `"order-7"` is not `order-7`.
   */
  readonly headerKey: boolean;
  /** Throws the module's error when the call cannot be told from another (HTTP: a body no parser read). */
  check(): void;
  /** The scope the key lives in, from the route's identity resolver (and host). */
  scope(route: ResolvedRouteOptions): string | Promise<string>;
  /** What tells this call from another under one key, tagged with how it was made; synchronous unless a function makes it. */
  fingerprint(route: ResolvedRouteOptions): string | Promise<string>;
  /** Whether a stored fingerprint, made under any fingerprint setting, is this call's. */
  matches(stored: string, fingerprint: string, route: ResolvedRouteOptions): boolean;
  /** Sends an outcome that is not the handler's: a stored response again, or the module's error. */
  answer(outcome: unknown): void;
}
