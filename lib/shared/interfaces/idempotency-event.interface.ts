import type { Type } from '@nestjs/common';
import type { IdempotencyErrorCode } from './idempotency-error.interface.js';

/**
 * What became of a decorated request (one per request), or what a store or the lease timer noticed
 * on the side (`lease-lost`, `evicted`: extra events, not request outcomes).
 */
export type IdempotencyOutcome =
  /** The handler ran and its response was stored. */
  | 'executed'
  /** A stored response was sent again; the handler did not run. */
  | 'replayed'
  /** 409: the key's first request is still running. */
  | 'conflict'
  /** 422: the key was used before for another request. */
  | 'mismatch'
  /** The module refused the request (400, 415, or 500 for an identity resolver's empty scope); `code` says why. */
  | 'rejected'
  /** 503: the store could not be asked, or a stored record could not be read; the handler did not run. */
  | 'store-unavailable'
  /** The handler threw (or its transaction rolled back): the key is free for a retry. */
  | 'released'
  /** The handler ran but its response was not stored (the commit failed, the lease was lost, a stream). */
  | 'not-stored'
  /** No key on a `missingHeader: 'pass-through'` route: the handler ran without idempotency. */
  | 'bypassed'
  /** A running handler's lease could not be renewed: its key may already be another request's. */
  | 'lease-lost'
  /** A stored record was evicted to make room before its ttl (InMemoryStore). */
  | 'evicted';

/**
 * One event of the `events` hook. It never holds the key, the body or another byte the client
 * sent: `keyHash` lets a log line be matched to a client's key by hashing that key the same way.
 */
export interface IdempotencyEvent {
  readonly outcome: IdempotencyOutcome;
  /** The handler, `Controller.method`; `undefined` for `evicted`. */
  readonly route: string | undefined;
  /** The HTTP method; `undefined` for `evicted` and outside HTTP (`IdempotencyInbox`). */
  readonly method: string | undefined;
  /** The status sent, where this module decided it; `undefined` where an application's filter does (`released`) or none was sent. */
  readonly status: number | undefined;
  /** Why, for `rejected`, `conflict`, `mismatch`, `store-unavailable` and a transactional `not-stored`. */
  readonly code: IdempotencyErrorCode | undefined;
  /** Time this request spent waiting for the store (claim, then commit or release), in ms. */
  readonly storeMs: number;
  /** SHA-256 of the key as the client sent it, in hex; `undefined` when there was none, or for `evicted`. */
  readonly keyHash: string | undefined;
  /** The store's class name, e.g. `RedisStore`. */
  readonly store: string;
  /** When the outcome was decided (epoch ms). */
  readonly at: number;
}

/** An injectable class for the `events` option: built by the application's container, so it can inject. */
export interface IdempotencyEventListener {
  onIdempotencyEvent(event: IdempotencyEvent): void | Promise<void>;
}

/** The `events` option: a function, or an injectable listener class. */
export type IdempotencyEventsOption = ((event: IdempotencyEvent) => void | Promise<void>) | Type<IdempotencyEventListener>;
