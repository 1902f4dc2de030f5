import { describe, expect, it } from '@jest/globals';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host.js';
import { KafkaContext, NatsContext, RmqContext } from '@nestjs/microservices';
import { readMessageKey } from '../../lib/transports/messages/message-key.reader.js';

/** What Nest hands an interceptor for a message: its data, then the transport's context. */
function message(data: unknown, transport: unknown) {
  const host = new ExecutionContextHost([data, transport]);
  host.setType('rpc');
  return host;
}

/** A KafkaContext as the Kafka server builds it: the record, its partition and topic (the client parts unused here). */
function kafka(record: object, partition = 3, topic = 'orders') {
  return new KafkaContext([record as never, partition, topic, {} as never, async () => undefined, {} as never]);
}

describe('readMessageKey', () => {
  it("reads a Kafka record's idempotency-key header (any case, text or bytes), else its topic:partition:offset", () => {
    const record = (headers: object | undefined, offset: unknown = '41') => ({
      key: Buffer.from('customer-7'),
      value: null,
      offset,
      headers,
    });
    expect(readMessageKey(message({}, kafka(record({ 'Idempotency-Key': Buffer.from('pay-1') }))), undefined)).toBe('pay-1');
    expect(readMessageKey(message({}, kafka(record({ 'idempotency-key': 'pay-2' }))), undefined)).toBe('pay-2');
    expect(readMessageKey(message({}, kafka(record({ 'IDEMPOTENCY-KEY': [Buffer.from('pay-3'), 'x'] }))), undefined)).toBe(
      'pay-3',
    );
    // Not the record's key: that is a partitioning key (many messages share it), not a message id.
    expect(readMessageKey(message({}, kafka(record({ other: 'x' }))), undefined)).toBe('orders:3:41');
    expect(readMessageKey(message({}, kafka(record(undefined, 7), 0, 'refunds')), undefined)).toBe('refunds:0:7');
    // A header without a usable value, and no offset: the payload's field, as on TCP.
    expect(readMessageKey(message({ idempotencyKey: 'k' }, kafka(record({ 'idempotency-key': 5 }, null))), undefined)).toBe('k');
    expect(readMessageKey(message({}, kafka(record({ 'idempotency-key': '' }, undefined))), undefined)).toBeUndefined();
  });

  it("reads RabbitMQ's messageId and NATS's Nats-Msg-Id; keyFrom comes first", () => {
    const rmq = new RmqContext([{ properties: { messageId: 'm-1' } }, {}, 'charge']);
    expect(readMessageKey(message({ idempotencyKey: 'k' }, rmq), undefined)).toBe('m-1');
    const headers = new Map([['Nats-Msg-Id', 'n-1']]);
    const nats = new NatsContext(['charge', { get: (name: string) => headers.get(name) ?? '' } as never]);
    expect(readMessageKey(message({}, nats), undefined)).toBe('n-1');
    expect(readMessageKey(message({ id: 'own' }, kafka({ offset: '1' })), (data) => (data as { id: string }).id)).toBe('own');
  });
});
