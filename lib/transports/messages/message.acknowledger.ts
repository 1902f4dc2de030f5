import { type ExecutionContext, Injectable, Logger } from '@nestjs/common';
import { IDEMPOTENCY_ERRORS } from '../../shared/exceptions/idempotency-errors.table.js';
import { IdempotencyException } from '../../shared/exceptions/idempotency.exception.js';
import { ATTEMPT_COUNTS, MAX_REQUEUE_DELAY_MS, REQUEUE_DELAY_MS } from '../../shared/idempotency.constants.js';
import { LOGS } from '../../shared/messages/operator.messages.js';
import type { ResolvedRouteOptions } from '../../shared/interfaces/resolved-options.interface.js';
import { chainedHandlers, deliveredPattern } from './message-patterns.util.js';

/** The part of an amqplib channel the acknowledger uses. */
interface Channel {
  ack(message: unknown): void;
  nack(message: unknown, allUpTo?: boolean, requeue?: boolean): void;
  on?(event: 'error', listener: (err: unknown) => void): unknown;
}

/** What RabbitMQ closes a channel with when it is told to settle a delivery it never expected an ack for. */
const NO_ACK_EXPECTED = /unknown delivery tag/i;

/** What an amqplib message holds that the acknowledger reads. */
interface AmqpMessage {
  properties?: { messageId?: unknown };
}

/** One RabbitMQ delivery under manual acks, as one of the handlers Nest runs for it sees it. */
export interface Delivery {
  /** This handler's outcome for the message with `key` is recorded (run and committed, replayed, skipped). */
  done(key: string | undefined): void;
  /** This handler was refused, or failed on the message with `key` (`undefined`: a message without one, passed through). */
  failed(err: unknown, key: string | undefined): void;
  /** This handler could not read the message's key or scope (`why`): nothing ran, and no delivery of it can do better. */
  unreadable(why: string): void;
}

/**
 * What a delivery comes to, worst last: a delivery is acked when every handler is done, requeued when
 * one can still succeed (after `pause` ms), else rejected without requeue.
 */
type Verdict = { kind: 'ack' } | { kind: 'reject' } | { kind: 'requeue'; pause: number };
const RANK = { ack: 0, reject: 1, requeue: 2 } as const;

/** The handlers of one delivery: how many Nest runs for it, how many began, how many are still to settle it, and what they came to so far. */
interface Group {
  expected: number;
  joined: number;
  left: number;
  verdict: Verdict;
  absent?: NodeJS.Timeout;
}

/**
 * How long after one handler of a delivery settled the others must have begun: one a guard refused
 * never reaches the module, and the delivery is then settled without it rather than left unacked.
 */
const ABSENT_HANDLER_MS = 10_000;

/**
 * amqplib throws when the channel has closed meanwhile (a lost connection): the broker then
 * redelivers every unacknowledged message of it anyway, so there is nothing left to settle.
 */
function settle(call: () => void): void {
  try {
    call();
  } catch {
    // the channel is gone; its deliveries are the broker's again
  }
}

type RmqContextLike = { getMessage?: () => unknown; getChannelRef?: () => unknown; getPattern?: () => unknown };

/** The message's own id for a log line: quoted, cut short, never the payload. */
function messageId(message: unknown): string {
  const id = (message as AmqpMessage).properties?.messageId;
  if (id === undefined || id === null) return '(none)';
  return JSON.stringify((typeof id === 'string' ? id : JSON.stringify(id)).slice(0, 100));
}

/**
 * Acknowledges RabbitMQ deliveries for `@Idempotent({ ack: true })` handlers (a queue consumed with
 * `noAck: false`), and those an `ack: 'skipped'` handler is not run for, after the outcome is
 * recorded: a consumer that dies before that gets the message redelivered, and the fenced claim
 * decides whether it runs. Nest runs every handler of an event pattern on one delivery: it is settled
 * once, when the last of them is done. A message that cannot succeed (reused with other data, no key,
 * a key that cannot be read) is rejected without requeue; one whose duplicate is in flight is
 * requeued after a pause; one whose handler failed is requeued after a pause that doubles with each
 * failure, at most `maxAttempts` times per message id in this process, then rejected without
 * requeue, which a queue with a dead-letter exchange parks there and one without deletes: every
 * rejection is logged at error level with the message id.
 */
@Injectable()
export class MessageAcknowledger {
  private readonly logger = new Logger('Idempotency');
  /** Failed attempts per route and key, oldest first: counted in this process only. */
  private readonly attempts = new Map<string, number>();
  /** The handlers of one delivery that have not settled it yet, by the delivery's message. */
  private readonly groups = new WeakMap<object, Group>();
  /** How many `ack: true` handlers Nest runs for a delivery of each event pattern. */
  private readonly chained = new Map<string | undefined, number>();
  /** The channels whose closing is watched for an ack on a `noAck: true` queue. */
  private readonly watched = new WeakSet<object>();
  private toldNoAck = false;

  /** At bootstrap, for every `ack: true` handler: an event pattern's handlers settle its deliveries together. */
  register(handler: object): void {
    for (const pattern of chainedHandlers(handler)) this.chained.set(pattern, (this.chained.get(pattern) ?? 0) + 1);
  }

  delivery(context: ExecutionContext, route: ResolvedRouteOptions): Delivery | undefined {
    const rpc = context.switchToRpc().getContext<RmqContextLike>();
    if (typeof rpc?.getMessage !== 'function' || typeof rpc.getChannelRef !== 'function') return undefined;
    const channel = rpc.getChannelRef() as Channel;
    const message = rpc.getMessage() as object;
    this.watch(channel, route);
    let group = this.groups.get(message);
    if (!group) {
      const pattern = typeof rpc.getPattern === 'function' ? deliveredPattern(rpc.getPattern()) : undefined;
      const expected = this.chained.get(pattern) ?? 1;
      group = { expected, joined: 0, left: expected, verdict: { kind: 'ack' } };
      this.groups.set(message, group);
    }
    group.joined++;
    const joined = group;
    // A handler that is done adds no verdict: the group's starts as an ack.
    const settleWith = (verdict?: Verdict): void => this.settle(joined, verdict, channel, message);
    return {
      done: (key) => {
        if (key !== undefined) this.attempts.delete(`${route.id}\0${key}`);
        settleWith();
      },
      failed: (err, key) => {
        if (key !== undefined && !(err instanceof IdempotencyException && err.code)) {
          const counted = `${route.id}\0${key}`;
          const attempts = this.count(counted);
          if (attempts < route.message!.maxAttempts) {
            return settleWith({ kind: 'requeue', pause: Math.min(REQUEUE_DELAY_MS * 2 ** (attempts - 1), MAX_REQUEUE_DELAY_MS) });
          }
          this.attempts.delete(counted);
          this.logger.error(LOGS.deadLettered(route.id, attempts, messageId(message)));
          return settleWith({ kind: 'reject' });
        }
        if (err instanceof IdempotencyException && err.code && IDEMPOTENCY_ERRORS[err.code].retryAfter) {
          return settleWith({ kind: 'requeue', pause: REQUEUE_DELAY_MS });
        }
        const why = err instanceof IdempotencyException && err.code ? err.code : 'its handler failed on a message without a key';
        this.logger.error(LOGS.messageRejected(route.id, why, messageId(message)));
        settleWith({ kind: 'reject' });
      },
      unreadable: (why) => {
        this.logger.error(LOGS.messageRejected(route.id, why, messageId(message)));
        settleWith({ kind: 'reject' });
      },
    };
  }

  private settle(group: Group, verdict: Verdict | undefined, channel: Channel, message: object): void {
    if (verdict && RANK[verdict.kind] > RANK[group.verdict.kind]) group.verdict = verdict;
    if (--group.left <= 0) return this.finish(group, channel, message);
    group.absent ??= setTimeout(() => {
      // The handlers that never began (a guard refused them) will not settle it.
      group.left -= group.expected - group.joined;
      group.expected = group.joined;
      if (group.left <= 0) this.finish(group, channel, message);
    }, ABSENT_HANDLER_MS).unref();
  }

  private finish(group: Group, channel: Channel, message: object): void {
    clearTimeout(group.absent);
    this.groups.delete(message);
    const final = group.verdict;
    if (final.kind === 'ack') {
      settle(() => channel.ack(message));
    } else if (final.kind === 'reject') {
      settle(() => channel.nack(message, false, false));
    } else {
      setTimeout(() => settle(() => channel.nack(message, false, true)), final.pause).unref();
    }
  }

  /**
   * Nest consumes with `noAck: true` unless told otherwise, and no handler can see it: RabbitMQ then
   * closes the channel on the first ack. That close is the only sign, so it is what is logged, once.
   */
  private watch(channel: Channel, route: ResolvedRouteOptions): void {
    if (this.watched.has(channel) || typeof channel.on !== 'function') return;
    this.watched.add(channel);
    channel.on('error', (err) => {
      if (this.toldNoAck || !NO_ACK_EXPECTED.test(String((err as Error | undefined)?.message))) return;
      this.toldNoAck = true;
      this.logger.error(LOGS.ackOnNoAck(route.id));
    });
  }

  private count(counted: string): number {
    const attempts = (this.attempts.get(counted) ?? 0) + 1;
    this.attempts.delete(counted);
    this.attempts.set(counted, attempts);
    if (this.attempts.size > ATTEMPT_COUNTS) this.attempts.delete(this.attempts.keys().next().value!);
    return attempts;
  }
}
