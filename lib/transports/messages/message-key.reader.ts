import type { ExecutionContext } from '@nestjs/common';
import { IdempotencyException } from '../../shared/exceptions/idempotency.exception.js';
import { MESSAGES } from '../../shared/messages/client.messages.js';
import type { MessageKeyFunction, MessageScopeFunction } from '../../shared/interfaces/idempotent-options.interface.js';
import { escapeScope, keyViolation } from '../../shared/utils/key.util.js';

/** Where a message of a transport without message ids (TCP, Redis) carries its key. */
const KEY_FIELD = 'idempotencyKey';

/** NATS JetStream's deduplication header: a producer's own id for the message. */
const NATS_MSG_ID = 'Nats-Msg-Id';

/** The Kafka record header a producer sets so that its resends are deduplicated too (any case). */
const KAFKA_KEY_HEADER = 'idempotency-key';

type Headers = { get(name: string): string };
type KafkaRecord = { headers?: Record<string, unknown>; offset?: unknown } | undefined;

/** A Kafka header's value as text: node clients hand over a Buffer, a string, or a list of them. */
function kafkaHeader(headers: Record<string, unknown> | undefined, name: string): string | undefined {
  for (const [key, value] of Object.entries(headers ?? {})) {
    if (key.toLowerCase() !== name) continue;
    const first: unknown = Array.isArray(value) ? value[0] : value;
    return Buffer.isBuffer(first) ? first.toString('utf8') : typeof first === 'string' ? first : undefined;
  }
  return undefined;
}

/**
 * The id the transport gave the message, read by shape so that no transport package is loaded:
 * RabbitMQ's `properties.messageId` (an `RmqContext`), NATS's `Nats-Msg-Id` header (a `NatsContext`),
 * Kafka's `idempotency-key` record header, else `topic:partition:offset` (a `KafkaContext`; the offset
 * catches a redelivery, not a producer's resend, which lands at another offset).
 */
function transportId(ctx: unknown): unknown {
  const rpc = ctx as {
    getMessage?: () => unknown;
    getChannelRef?: unknown;
    getHeaders?: () => unknown;
    getSubject?: unknown;
    getTopic?: () => string;
    getPartition?: () => number;
  };
  if (typeof rpc?.getMessage === 'function' && typeof rpc.getChannelRef === 'function') {
    return (rpc.getMessage() as { properties?: { messageId?: unknown } } | undefined)?.properties?.messageId;
  }
  if (typeof rpc?.getMessage === 'function' && typeof rpc.getTopic === 'function' && typeof rpc.getPartition === 'function') {
    const record = rpc.getMessage() as KafkaRecord;
    const offset = record?.offset;
    const position =
      typeof offset === 'string' || typeof offset === 'number' ? `${rpc.getTopic()}:${rpc.getPartition()}:${offset}` : undefined;
    return kafkaHeader(record?.headers, KAFKA_KEY_HEADER) ?? position;
  }
  if (typeof rpc?.getHeaders === 'function' && typeof rpc.getSubject === 'function') {
    const headers = rpc.getHeaders() as Headers | undefined;
    return typeof headers?.get === 'function' ? headers.get(NATS_MSG_ID) || undefined : undefined;
  }
  return undefined;
}

/**
 * A message's key: what the handler's `keyFrom` returns; else the transport's message id (RabbitMQ,
 * NATS, Kafka); else the payload's `idempotencyKey` field. Anything but a non-empty string is no key.
 */
export function readMessageKey(context: ExecutionContext, keyFrom: MessageKeyFunction | undefined): string | undefined {
  const rpc = context.switchToRpc();
  const data: unknown = rpc.getData();
  const key: unknown = keyFrom
    ? keyFrom(data, context)
    : (transportId(rpc.getContext()) ??
      (data !== null && typeof data === 'object' ? (data as Record<string, unknown>)[KEY_FIELD] : undefined));
  return typeof key === 'string' && key !== '' ? key : undefined;
}

/**
 * A message's scope from the handler's `scope` option, checked as an HTTP identity's is: `undefined`
 * without the option; a value that is no non-empty string is the application's fault
 * (`scope-unresolved`), one too long or with a space or control character `scope-invalid`.
 */
export async function readMessageScope(
  context: ExecutionContext,
  read: MessageScopeFunction | undefined,
  maxScopeLength: number,
): Promise<string | undefined> {
  if (!read) return undefined;
  const scope: unknown = await read(context.switchToRpc().getData(), context);
  if (typeof scope !== 'string' || scope === '') throw IdempotencyException.of('scope-unresolved', MESSAGES.noScope);
  const problem = keyViolation(MESSAGES.scope, scope, escapeScope(scope).length, maxScopeLength);
  if (problem) throw IdempotencyException.of('scope-invalid', problem);
  return scope;
}
