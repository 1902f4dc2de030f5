import { describe, expect, it } from '@jest/globals';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import type { StoredResponse } from '../../lib/stores/index.js';
import { sendFinal } from '../../lib/transports/http/response.writer.js';
import { FakeResponse } from '../support/fake-response.js';

/** The parts of a Fastify reply the writer calls, recorded in order. */
class FakeReply {
  readonly raw = new FakeResponse().raw;
  readonly calls: unknown[][] = [];
  code(status: number): this {
    this.calls.push(['code', status]);
    return this;
  }
  status(status: number): this {
    this.calls.push(['status', status]);
    return this;
  }
  header(name: string, value: unknown): this {
    this.calls.push(['header', name, value]);
    return this;
  }
  headers(values: object): this {
    this.calls.push(['headers', values]);
    return this;
  }
  type(value: string): this {
    this.calls.push(['type', value]);
    return this;
  }
  getHeaders(): Record<string, unknown> {
    return { 'x-reply': '1', ...this.raw.getHeaders() };
  }
  send(payload?: unknown): this {
    this.calls.push(['send', payload]);
    return this;
  }
}

const stored: StoredResponse = {
  status: 201,
  headers: { 'content-type': 'application/json', 'x-tags': ['a', 'b'] },
  body: Buffer.from('{"id":1}'),
};

describe('sendFinal', () => {
  it('sends status, headers, extra headers and the body on a Node response, keeping headers already set', () => {
    const res = new FakeResponse();
    res.setHeader('access-control-allow-origin', 'https://b.example');
    sendFinal(res, stored, { 'x-extra': '1' });
    expect(res.statusCode).toBe(201);
    expect(res.getHeaders()).toEqual({
      'access-control-allow-origin': 'https://b.example',
      'content-type': 'application/json',
      'x-tags': ['a', 'b'],
      'x-extra': '1',
    });
    expect(res.calls).toEqual([{ method: 'end', args: [stored.body] }]);
  });

  it('locks a Node response: nothing written after it changes what was sent', async () => {
    const res = new FakeResponse();
    sendFinal(res, stored, {});
    const raw = res.raw as unknown as Record<string, (...a: unknown[]) => unknown>;
    expect(raw.setHeader('content-type', 'text/html')).toBe(res);
    expect(raw.appendHeader('x-a', '1')).toBe(res);
    expect(raw.removeHeader('x-tags')).toBe(res);
    expect(raw.writeHead(500, { 'x-b': '1' })).toBe(res);
    expect(raw.flushHeaders()).toBe(res);
    let called = 0;
    expect(raw.write('late', () => called++)).toBe(true);
    expect(raw.end('{"caughtByApp":true}', 'utf8', () => called++)).toBe(res);
    expect(raw.end()).toBe(res);
    expect(res.calls).toEqual([{ method: 'end', args: [stored.body] }]);
    expect(res.getHeaders()).toEqual({ 'content-type': 'application/json', 'x-tags': ['a', 'b'] });
    expect(called).toBe(0);
    await new Promise((r) => process.nextTick(r));
    // A caller waiting on a callback is not left waiting for ever.
    expect(called).toBe(2);
  });

  it('locks methods a middleware set on the response itself (compression wraps write and end)', () => {
    const res = new FakeResponse();
    const wrapped: unknown[][] = [];
    Object.assign(res, {
      write: (...args: unknown[]) => wrapped.push(['write', ...args]),
      end: (...args: unknown[]) => {
        wrapped.push(['end', ...args]);
        return res;
      },
    });
    sendFinal(res, stored, {});
    expect(wrapped).toEqual([['end', stored.body]]);
    res.raw.write('late');
    res.raw.end('{"caughtByApp":true}');
    expect(wrapped).toHaveLength(1);
  });

  it('locks by prototype: responses keep their own properties, and later responses are not locked', () => {
    const first = new FakeResponse();
    sendFinal(first, stored, {});
    expect(Object.keys(first)).toEqual(['statusCode', 'calls', 'headers']);
    expect(first).toBeInstanceOf(FakeResponse);
    const second = new FakeResponse();
    second.setHeader('x-a', '1');
    second.end('next');
    expect(second.getHeaders()).toEqual({ 'x-a': '1' });
    expect(second.calls).toEqual([{ method: 'end', args: ['next'] }]);
    sendFinal(second, stored, {});
    second.raw.end('late');
    expect(second.calls).toHaveLength(2);
    // One locked prototype for every response of a prototype, made once.
    expect(Object.getPrototypeOf(second)).toBe(Object.getPrototypeOf(first));
  });

  it("locks a response on Node's own prototype with own methods, leaving the prototype alone", () => {
    const res = new ServerResponse(new IncomingMessage(new Socket()));
    sendFinal(res, stored, {});
    expect(Object.getPrototypeOf(res)).toBe(ServerResponse.prototype);
    expect(res.headersSent).toBe(true);
    // Node itself would throw ERR_HTTP_HEADERS_SENT here.
    expect(res.setHeader('content-type', 'text/html')).toBe(res);
    expect(res.getHeader('content-type')).toBe('application/json');
  });

  it('goes through the Fastify reply, in order, sending no payload for an empty body, then locks it', () => {
    const reply = new FakeReply();
    sendFinal(reply, stored, { 'x-extra': '1' });
    expect(reply.calls).toEqual([
      ['code', 201],
      ['header', 'content-type', 'application/json'],
      ['header', 'x-tags', ['a', 'b']],
      ['header', 'x-extra', '1'],
      ['send', stored.body],
    ]);
    expect(reply.code(500)).toBe(reply);
    expect(reply.status(500)).toBe(reply);
    expect(reply.header('content-type', 'text/html')).toBe(reply);
    expect(reply.headers({ a: 1 })).toBe(reply);
    expect(reply.type('text/html')).toBe(reply);
    expect(reply.send('{"caughtByApp":true}')).toBe(reply);
    expect(reply.calls).toHaveLength(5);
    const empty = new FakeReply();
    sendFinal(empty, { status: 204, headers: {}, body: Buffer.alloc(0) }, {});
    expect(empty.calls).toEqual([
      ['code', 204],
      ['send', undefined],
    ]);
  });

  it('treats an object with raw but no code() as a Node response', () => {
    const res = Object.defineProperty(new FakeResponse(), 'raw', { value: {} });
    sendFinal(res, stored, {});
    expect(res.calls).toEqual([{ method: 'end', args: [stored.body] }]);
  });
});
