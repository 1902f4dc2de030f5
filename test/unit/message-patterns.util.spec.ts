import { describe, expect, it } from '@jest/globals';
import { EventPattern, MessagePattern, Transport } from '@nestjs/microservices';
import { chainedHandlers, deliveredPattern } from '../../lib/transports/messages/message-patterns.util.js';

class Handlers {
  @EventPattern('order.paid')
  paid(_data: unknown) {}

  @EventPattern([{ cmd: 'pay', v: 2 }, 'order.paid', 'order.paid'])
  several(_data: unknown) {}

  @EventPattern('order.paid', Transport.RMQ)
  rabbit(_data: unknown) {}

  @EventPattern('order.paid', Transport.NATS)
  nats(_data: unknown) {}

  @MessagePattern('charge')
  reply(_data: unknown) {}

  plain() {}
}

describe('the event patterns Nest chains handlers on', () => {
  it('an @EventPattern for RabbitMQ or every transport, each pattern once; no @MessagePattern, another transport or none', () => {
    const p = Handlers.prototype;
    expect(chainedHandlers(p.paid)).toEqual(['order.paid']);
    expect(chainedHandlers(p.several)).toEqual(['{"cmd":"pay","v":2}', 'order.paid']);
    expect(chainedHandlers(p.rabbit)).toEqual(['order.paid']);
    expect(chainedHandlers(p.nats)).toEqual([]);
    expect(chainedHandlers(p.reply)).toEqual([]);
    expect(chainedHandlers(p.plain)).toEqual([]);
  });

  it('a delivered pattern reads as the declared one: a string as it is, an object or its JSON with keys sorted at every level', () => {
    expect(deliveredPattern('order.paid')).toBe('order.paid');
    expect(deliveredPattern('{"v":2,"cmd":"pay"}')).toBe('{"cmd":"pay","v":2}');
    expect(deliveredPattern({ v: 2, cmd: 'pay' })).toBe('{"cmd":"pay","v":2}');
    expect(deliveredPattern({ b: { d: [1, 'x'], c: null }, a: 'q"' })).toBe('{"a":"q\\"","b":{"c":null,"d":[1,x]}}');
    expect(deliveredPattern('{not json')).toBe('{not json');
    expect(deliveredPattern(7)).toBe('7');
    expect(deliveredPattern('7')).toBe('7');
  });
});
