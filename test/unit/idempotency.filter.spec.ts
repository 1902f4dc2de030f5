import { describe, expect, it } from '@jest/globals';
import type { ArgumentsHost } from '@nestjs/common';
import { IdempotencyException, IdempotencyExceptionFilter, type StoredResponse } from '../../lib/index.js';
import { IdempotentReplay } from '../../lib/idempotent-replay.exception.js';
import { sendStored } from '../../lib/idempotency.filter.js';
import { FakeResponse } from '../support/fake-response.js';

/** The parts of a Fastify reply the filter calls, recorded in order. */
class FakeReply {
  readonly raw = new FakeResponse().raw;
  readonly calls: unknown[][] = [];
  code(status: number): this {
    this.calls.push(['code', status]);
    return this;
  }
  header(name: string, value: unknown): this {
    this.calls.push(['header', name, value]);
    return this;
  }
  send(payload?: unknown): this {
    this.calls.push(['send', payload]);
    return this;
  }
}

const host = (res: object) => ({ switchToHttp: () => ({ getResponse: () => res }) }) as unknown as ArgumentsHost;
const stored: StoredResponse = {
  status: 201,
  headers: { 'content-type': 'application/json', 'x-tags': ['a', 'b'] },
  body: Buffer.from('{"id":1}'),
};

describe('sendStored', () => {
  it('sends status, headers, extra headers and the body on a Node response', () => {
    const res = new FakeResponse();
    sendStored(res, stored, { 'x-extra': '1' });
    expect(res.statusCode).toBe(201);
    expect(res.getHeaders()).toEqual({ 'content-type': 'application/json', 'x-tags': ['a', 'b'], 'x-extra': '1' });
    expect(res.calls).toEqual([{ method: 'end', args: [stored.body] }]);
  });

  it('goes through the Fastify reply, in order, sending no payload for an empty body', () => {
    const reply = new FakeReply();
    sendStored(reply, stored, { 'x-extra': '1' });
    expect(reply.calls).toEqual([
      ['code', 201],
      ['header', 'content-type', 'application/json'],
      ['header', 'x-tags', ['a', 'b']],
      ['header', 'x-extra', '1'],
      ['send', stored.body],
    ]);
    const empty = new FakeReply();
    sendStored(empty, { status: 204, headers: {}, body: Buffer.alloc(0) }, {});
    expect(empty.calls).toEqual([['code', 204], ['send', undefined]]);
  });

  it('treats an object with raw but no code() as a Node response', () => {
    const res = Object.defineProperty(new FakeResponse(), 'raw', { value: {} });
    sendStored(res, stored, {});
    expect(res.calls).toEqual([{ method: 'end', args: [stored.body] }]);
  });
});

describe('IdempotencyExceptionFilter', () => {
  const filter = new IdempotencyExceptionFilter();

  it('replays a stored response with Idempotent-Replayed: true', () => {
    const res = new FakeResponse();
    filter.catch(new IdempotentReplay(stored), host(res));
    expect(res.statusCode).toBe(201);
    expect(res.getHeaders()).toEqual({ 'content-type': 'application/json', 'x-tags': ['a', 'b'], 'idempotent-replayed': 'true' });
    expect(res.calls).toEqual([{ method: 'end', args: [stored.body] }]);
  });

  it('answers its own errors as small JSON with their headers', () => {
    const res = new FakeResponse();
    filter.catch(new IdempotencyException(409, 'busy', { 'retry-after': '1' }), host(res));
    expect(res.statusCode).toBe(409);
    expect(res.getHeaders()).toEqual({ 'content-type': 'application/json; charset=utf-8', 'retry-after': '1' });
    expect(res.calls).toEqual([{ method: 'end', args: [Buffer.from('{"error":"busy"}')] }]);
    const reply = new FakeReply();
    filter.catch(new IdempotencyException(400, 'bad'), host(reply));
    expect(reply.calls).toEqual([
      ['code', 400],
      ['header', 'content-type', 'application/json; charset=utf-8'],
      ['send', Buffer.from('{"error":"bad"}')],
    ]);
  });
});

describe('IdempotencyException', () => {
  it('is an HttpException with a small JSON body and no headers by default', () => {
    const e = new IdempotencyException(422, 'reused');
    expect(e.getStatus()).toBe(422);
    expect(e.getResponse()).toEqual({ error: 'reused' });
    expect(e.reason).toBe('reused');
    expect(e.headers).toEqual({});
  });
});
