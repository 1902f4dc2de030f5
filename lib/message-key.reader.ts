import type { ExecutionContext } from '@nestjs/common';
import type { MessageKeyFunction } from './interfaces/idempotent-options.interface.js';

/** Where a message of a transport without message ids (TCP, Redis) carries its key. */
const KEY_FIELD = 'idempotencyKey';

/** NATS JetStream's deduplication header: a producer's own id for the message. */
const NATS_MSG_ID = 'Nats-Msg-Id';

type Headers = { get(name: string): string };

/**
 * The id the transport gave the message, read by shape so that no transport package is loaded:
 * RabbitMQ's `properties.messageId` (an `RmqContext`), NATS's `Nats-Msg-Id` header (a `NatsContext`).
 */
function transportId(ctx: unknown): unknown {
  const rpc = ctx as { getMessage?: () => unknown; getChannelRef?: unknown; getHeaders?: () => unknown; getSubject?: unknown };
  if (typeof rpc?.getMessage === 'function' && typeof rpc.getChannelRef === 'function') {
    return (rpc.getMessage() as { properties?: { messageId?: unknown } } | undefined)?.properties?.messageId;
  }
  if (typeof rpc?.getHeaders === 'function' && typeof rpc.getSubject === 'function') {
    const headers = rpc.getHeaders() as Headers | undefined;
    return typeof headers?.get === 'function' ? headers.get(NATS_MSG_ID) || undefined : undefined;
  }
  return undefined;
}

/**
 * A message's key: what the handler's `keyFrom` returns; else the transport's message id (RabbitMQ,
 * NATS); else the payload's `idempotencyKey` field. Anything but a non-empty string is no key.
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
