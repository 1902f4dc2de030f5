import { type ExecutionContext, Injectable, Logger } from '@nestjs/common';
import { IDEMPOTENCY_ERRORS } from './exceptions/idempotency-errors.table.js';
import { IdempotencyException } from './exceptions/idempotency.exception.js';
import { ATTEMPT_COUNTS, REQUEUE_DELAY_MS } from './idempotency.constants.js';
import { LOGS } from './idempotency.messages.js';
import type { ResolvedRouteOptions } from './interfaces/resolved-options.interface.js';

/** The part of an amqplib channel the acknowledger uses. */
interface Channel {
  ack(message: unknown): void;
  nack(message: unknown, allUpTo?: boolean, requeue?: boolean): void;
}

/** One RabbitMQ delivery under manual acks, settled once with what the message's outcome says. */
export interface Delivery {
  /** The outcome is recorded (run and committed, replayed, skipped): the broker may forget the message. */
  done(): void;
  /** The message was refused or its handler failed: requeue it, or reject it for good. */
  failed(err: unknown): void;
}

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

function rmqDelivery(context: ExecutionContext): { channel: Channel; message: unknown } | undefined {
  const rpc = context.switchToRpc().getContext<{ getMessage?: () => unknown; getChannelRef?: () => unknown }>();
  if (typeof rpc?.getMessage !== 'function' || typeof rpc.getChannelRef !== 'function') return undefined;
  return { channel: rpc.getChannelRef() as Channel, message: rpc.getMessage() };
}

/**
 * Acknowledges RabbitMQ deliveries for `@Idempotent({ ack: true })` handlers (a queue consumed with
 * `noAck: false`), after the outcome is recorded: a consumer that dies before that gets the message
 * redelivered, and the fenced claim decides whether it runs. A message that cannot succeed (reused
 * with other data, no key) is rejected without requeue; one whose handler failed, or whose duplicate
 * is in flight, is requeued after a pause — the failed ones at most `maxAttempts` times per message id
 * in this process, then rejected without requeue, which a queue with a dead-letter exchange parks there.
 */
@Injectable()
export class MessageAcknowledger {
  private readonly logger = new Logger('Idempotency');
  /** Failed attempts per route and key, oldest first: counted in this process only. */
  private readonly attempts = new Map<string, number>();

  delivery(context: ExecutionContext, route: ResolvedRouteOptions, key: string | undefined): Delivery | undefined {
    const rmq = rmqDelivery(context);
    if (!rmq) return undefined;
    const { channel, message } = rmq;
    const counted = key === undefined ? undefined : `${route.id}\0${key}`;
    const requeue = (): void => void setTimeout(() => settle(() => channel.nack(message, false, true)), REQUEUE_DELAY_MS).unref();
    const reject = (): void => settle(() => channel.nack(message, false, false));
    return {
      done: () => {
        if (counted !== undefined) this.attempts.delete(counted);
        settle(() => channel.ack(message));
      },
      failed: (err) => {
        if (err instanceof IdempotencyException && err.code) {
          if (IDEMPOTENCY_ERRORS[err.code].retryAfter) return requeue();
          this.logger.warn(LOGS.messageRejected(route.id, err.code));
          return reject();
        }
        if (counted === undefined) return reject();
        const attempts = this.count(counted);
        if (attempts < route.message!.maxAttempts) return requeue();
        this.attempts.delete(counted);
        this.logger.warn(LOGS.deadLettered(route.id, attempts));
        reject();
      },
    };
  }

  private count(counted: string): number {
    const attempts = (this.attempts.get(counted) ?? 0) + 1;
    this.attempts.delete(counted);
    this.attempts.set(counted, attempts);
    if (this.attempts.size > ATTEMPT_COUNTS) this.attempts.delete(this.attempts.keys().next().value!);
    return attempts;
  }
}
