import { describe, expect, it } from '@jest/globals';
import { renderValue } from '../../lib/transports/http/value.renderer.js';

const json = 'application/json; charset=utf-8';

describe('renderValue', () => {
  it('serialises as the adapters do: objects as JSON, strings as text, bytes as they are, nothing as an empty body', () => {
    expect(renderValue({ id: 1 }, 201, {}, {}, 'express')).toEqual({
      status: 201,
      headers: { 'content-type': json },
      body: Buffer.from('{"id":1}'),
    });
    expect(renderValue([1], 200, {}, {}, 'fastify')).toEqual({
      status: 200,
      headers: { 'content-type': json },
      body: Buffer.from('[1]'),
    });
    expect(renderValue('ü', 200, {}, {}, 'express')).toEqual({
      status: 200,
      headers: { 'content-type': 'text/html; charset=utf-8' },
      body: Buffer.from('ü'),
    });
    expect(renderValue('ü', 200, {}, {}, 'fastify').headers).toEqual({ 'content-type': 'text/plain; charset=utf-8' });
    expect(renderValue(42, 200, {}, {}, 'express')).toEqual({
      status: 200,
      headers: { 'content-type': 'text/html; charset=utf-8' },
      body: Buffer.from('42'),
    });
    expect(renderValue(42, 200, {}, {}, 'fastify')).toEqual({
      status: 200,
      headers: { 'content-type': json },
      body: Buffer.from('42'),
    });
    expect(renderValue(new Uint8Array([1, 2]), 200, {}, {}, 'express')).toEqual({
      status: 200,
      headers: { 'content-type': 'application/octet-stream' },
      body: Buffer.from([1, 2]),
    });
    for (const nothing of [undefined, null]) {
      expect(renderValue(nothing, 204, {}, {}, 'express')).toEqual({ status: 204, headers: {}, body: Buffer.alloc(0) });
    }
  });

  it("keeps the handler's headers and its content type, but not those set before it ran or never stored", () => {
    const before = { 'x-request-id': 'r1', 'content-type': 'text/csv' };
    const headers = { 'x-request-id': 'r1', 'x-set': '1', 'set-cookie': 'a=b', 'content-type': 'text/csv' };
    // A content type describes the body: stored even when set before the handler (by @Header(), H26), and not replaced.
    expect(renderValue('a,b', 201, headers, before, 'express')).toEqual({
      status: 201,
      headers: { 'x-set': '1', 'content-type': 'text/csv' },
      body: Buffer.from('a,b'),
    });
    expect(renderValue({ a: 1 }, 201, { 'content-type': 'application/vnd.x+json' }, {}, 'express').headers).toEqual({
      'content-type': 'application/vnd.x+json',
    });
  });
});
