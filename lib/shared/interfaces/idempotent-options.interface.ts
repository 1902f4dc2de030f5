import type { ExecutionContext } from '@nestjs/common';
import type { IdempotencyIdentity } from './identity-resolver.interface.js';

/** Per-route overrides given to `@Idempotent()`; anything left out comes from the module options. */
export interface IdempotentOptions {
  /** How long this route's responses are kept, in ms. */
  ttlMs?: number;
  /** This route's caller scope, replacing the module's `identity`. */
  identity?: IdempotencyIdentity;
  /** What to do when this route's request has no key. */
  missingHeader?: MissingHeaderPolicy;
  /**
   * Exactly-once with your database: the handler runs inside one transaction of the module's
   * `transactions` port, and its idempotency record is committed as that transaction's last statement.
   * Needs `PostgresStore`. Default `false`. See docs/guides/exactly-once.md.
   */
  transactional?: boolean;
  /**
   * Recovery points: the handler takes `@Phases() run: PhasedRun` and splits its work into atomic
   * phases (`run.phase()`, `run.foreign()`, `run.finish()`), each one transaction of the module's
   * `transactions` port that also stores the phase's result with the key. A retry after a crash
   * resumes at the first phase not committed. Needs `PostgresStore`; excludes `transactional`.
   * Default `false`. See docs/guides/recovery-points.md.
   */
  atomicPhases?: boolean;
  /** How this route fingerprints request bodies, replacing the module's `fingerprint`. */
  fingerprint?: FingerprintMode;
  /** What a duplicate of this route's request still running gets, replacing the module's `inFlight`. */
  inFlight?: InFlightPolicy;
  /** With `inFlight: 'wait'`: the longest this route's duplicates wait, in ms, replacing the module's `waitMs`. */
  waitMs?: number;
  /**
   * Message handlers (`@MessagePattern()`, `@EventPattern()`): reads the message's id, the key, from
   * its data and context. Default: the transport's message id (RabbitMQ `properties.messageId`, NATS
   * `Nats-Msg-Id` header, Kafka `idempotency-key` header else `topic:partition:offset`), else
   * `data.idempotencyKey`; a non-empty string. GraphQL mutations: reads
   * the key from the arguments (`data` is the mutation's arguments) instead of the key header.
   */
  keyFrom?: MessageKeyFunction;
  /**
   * Message handlers: where the message's key is unique, e.g. the tenant a queue, subject or header
   * names: `(data, ctx) => ctx.switchToRpc().getContext().getMessage().properties.headers['x-tenant']`.
   * Keys of two scopes never share a record. A non-empty string of at most the module's
   * `maxScopeLength`, without spaces or control characters; anything else refuses the message
   * (`scope-unresolved`, `scope-invalid`) without running it. Default: one scope for all messages.
   * Each handler keeps its own records whatever the scope: two handlers never share one.
   */
  scope?: MessageScopeFunction;
  /** Message handlers: what to do with a message without a key. Default `'reject'` (an RpcException). */
  missingKey?: MissingHeaderPolicy;
  /**
   * RabbitMQ handlers of a queue consumed with `noAck: false` (Nest's default is `true`):
   * - `true`: the module acknowledges each delivery once its outcome is recorded, and the handler
   *   must not ack it. Refused and failed messages are requeued or rejected as
   *   docs/guides/message-handlers.md says.
   * - `'skipped'`: Nest's manual-ack recipe, the handler acks what it runs; the module settles only
   *   the deliveries it does not hand to the handler (a replayed or in-flight duplicate, a refused
   *   message), which would otherwise stay unacknowledged and stall the consumer.
   * - `false` (default): nothing is acked by the module (a queue consumed with `noAck: true`).
   * Ignored on other transports.
   */
  ack?: boolean | 'skipped';
  /**
   * With `ack`: how many deliveries of one message id may fail (the handler threw) in this process
   * before it is rejected without requeue, to the queue's dead-letter exchange if it has one (without
   * one, RabbitMQ deletes it). Each failure is requeued after a pause that doubles from 1 s up to 30 s:
   * the default 8 attempts span about 90 s of a downstream outage.
   */
  maxAttempts?: number;
}

/**
 * The id of a message, e.g. `(data, ctx) => ctx.switchToRpc().getContext().getMessage().properties.messageId`
 * on RabbitMQ. `undefined` or an empty string: the message has no key (see `missingKey`).
 */
// `any`: the transport's payload, whatever the producer sent.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type MessageKeyFunction = (data: any, context: ExecutionContext) => string | undefined;

/** A message's scope, read from its data and context (queue, subject, a header); may return a promise. */
// `any`: the transport's payload, whatever the producer sent.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type MessageScopeFunction = (data: any, context: ExecutionContext) => string | Promise<string>;

/**
 * What the body part of a request's fingerprint is made of.
 * - `'canonical'` (default): the parsed body as JSON with sorted keys. A client that re-serialises
 *   the same data in another key order, or with other white space, still gets its replay.
 * - `'raw'`: the body's bytes as received (needs Nest's `rawBody: true` application option). Hashing
 *   them costs about what SHA-256 of the bytes costs, but a retry must resend the very same bytes:
 *   the same data in another key order is another request (422).
 * - a {@link FingerprintFunction}: what it returns, canonicalised like a body, stands for the body.
 *
 * Changing it between deploys is safe: see docs/how-it-works.md ("Changing the fingerprint setting").
 */
export type FingerprintMode = 'canonical' | 'raw' | FingerprintFunction;

/**
 * Picks what of a request makes it "the same request", e.g. `(req) => ({ amount: req.body.amount })`
 * to ignore a client timestamp. Runs after guards (it sees `req.user`) and before pipes, before
 * the key is claimed; may return a promise. Handler, method, path and query stay in the
 * fingerprint. What it throws goes to the application's filters as it is (nothing is claimed yet).
 */
// `any`: the adapter's request (Express or Fastify), as for IdentityFunction.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type FingerprintFunction = (request: any, context: ExecutionContext) => unknown;

/**
 * How a replay is marked: `'header'` (default) adds the `replayedHeader`; `'body'` adds
 * `"replayed": true` to a JSON object body instead (the convention of the project's second seed);
 * `'header-and-body'` does both. Other bodies are replayed untouched.
 */
export type ReplayFlag = 'header' | 'body' | 'header-and-body';

/** The body of the module's own errors: `{"error": "…"}`, or RFC 9457 problem details. */
export type ErrorFormat = 'json' | 'problem+json';

/**
 * `'conflict'`: a duplicate of a request still running gets 409 at once. `'wait'`: it waits (up to
 * `waitMs`) for the first to settle, woken by the store's notification, and gets the replay.
 */
export type InFlightPolicy = 'conflict' | 'wait';

/** `'reject'`: answer 400. `'pass-through'`: run the handler without deduplication, store nothing. */
export type MissingHeaderPolicy = 'reject' | 'pass-through';
