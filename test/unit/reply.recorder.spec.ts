import { afterEach, describe, expect, it, jest } from '@jest/globals';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { Readable } from 'node:stream';
import type { StoredResponse } from '../../lib/stores/index.js';
import { canRecordReply, installReplyRecorder, recordReply } from '../../lib/transports/http/reply.recorder.js';
import type { RecorderHooks } from '../../lib/transports/http/response.recorder.js';

/** A Fastify app whose one route records its reply (from `before`) and then sends what `send` does. */
async function app(send: (reply: FastifyReply) => unknown, hooks: RecorderHooks, setup?: (f: FastifyInstance) => void) {
  const fastify = Fastify();
  setup?.(fastify);
  expect(installReplyRecorder(fastify)).toBe(true);
  fastify.addHook('onRequest', (_req, reply, done) => {
    reply.header('x-request-id', 'r-1'); // set before the handler: not the answer's
    done();
  });
  fastify.post('/', (_req, reply) => {
    const recording = recordReply(reply, { 'x-request-id': 'r-1' }, hooks);
    expect(recording).toBeDefined();
    return send(reply);
  });
  await fastify.ready();
  apps.push(fastify);
  return fastify;
}
const apps: FastifyInstance[] = [];

/** POSTs to the app over loopback (light-my-request's inject cannot load under jest's ESM mode on Node 20). */
async function post(fastify: FastifyInstance) {
  if (!fastify.server.listening) await fastify.listen({ port: 0, host: '127.0.0.1' });
  const { port } = fastify.server.address() as { port: number };
  const res = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST' });
  const bytes = Buffer.from(await res.arrayBuffer());
  return { statusCode: res.status, headers: Object.fromEntries(res.headers), bytes, body: bytes.toString() };
}
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

function hooks(onEnd: RecorderHooks['onEnd'] = () => Promise.resolve()) {
  const stored: StoredResponse[] = [];
  const onStream = jest.fn();
  return {
    stored,
    onStream,
    hooks: { onEnd: (r: StoredResponse) => (stored.push(r), onEnd(r)), onStream } satisfies RecorderHooks,
  };
}

describe('recordReply (Fastify onSend)', () => {
  it('stores the serialised payload, the status and the headers set since the start, before anything is written', async () => {
    let written = false;
    const h = hooks(async () => {
      written = false; // nothing has gone out while the record is stored
    });
    const fastify = await app(
      (reply) => reply.code(201).header('x-charge', 'ch_1').send({ id: 7 }),
      h.hooks,
      (f) => f.addHook('onResponse', (_req, _reply, done) => ((written = true), done())),
    );
    const res = await post(fastify);
    expect(res.statusCode).toBe(201);
    expect(res.body).toBe('{"id":7}');
    expect(h.stored).toEqual([
      {
        status: 201,
        headers: { 'x-charge': 'ch_1', 'content-type': 'application/json; charset=utf-8' },
        body: Buffer.from('{"id":7}'),
      },
    ]);
    expect(written).toBe(true);
  });

  it('takes a Buffer (byte for byte, not as text), a Uint8Array view and no payload as they are', async () => {
    const view = new Uint8Array(Buffer.from('xxabcxx')).subarray(2, 5);
    const binary = Buffer.from([0xff, 0x00, 0xfe]); // not UTF-8
    for (const [payload, body] of [
      [binary, binary],
      [view, Buffer.from('abc')],
      [undefined, Buffer.alloc(0)],
    ] as const) {
      const h = hooks();
      const fastify = await app(
        (reply) => reply.code(200).header('content-type', 'application/octet-stream').send(payload),
        h.hooks,
      );
      const res = await post(fastify);
      expect(res.bytes).toEqual(body);
      expect(h.stored.map((r) => r.body)).toEqual([body]);
    }
  });

  it('reports a stream (a Node stream, a web stream) and passes it on unrecorded', async () => {
    for (const make of [() => Readable.from(['a', 'b']), () => new Blob(['ab']).stream()]) {
      const h = hooks();
      const fastify = await app((reply) => reply.header('content-type', 'text/plain').send(make()), h.hooks);
      const res = await post(fastify);
      expect(res.body).toBe('ab');
      expect(h.stored).toEqual([]);
      expect(h.onStream).toHaveBeenCalledTimes(1);
    }
  });

  it('sends what onEnd resolves to instead: its status and headers, without the ones set since the start', async () => {
    const instead: StoredResponse = { status: 503, headers: { 'retry-after': '1' }, body: Buffer.from('{"error":"x"}') };
    const h = hooks(() => Promise.resolve(instead));
    const fastify = await app((reply) => reply.code(201).header('x-charge', 'ch_1').send({ id: 7 }), h.hooks);
    const res = await post(fastify);
    expect(res.statusCode).toBe(503);
    expect(res.body).toBe('{"error":"x"}');
    expect(res.headers['retry-after']).toBe('1');
    expect(res.headers['x-charge']).toBeUndefined();
    expect(res.headers['x-request-id']).toBe('r-1'); // set before the start: it stays
    expect(res.headers['content-length']).toBe('13');
  });

  it('sends the reply as it was when onEnd fails or resolves to nothing', async () => {
    for (const onEnd of [() => Promise.reject(new Error('store down')), () => Promise.resolve()]) {
      const h = hooks(onEnd);
      const fastify = await app((reply) => reply.code(201).send({ id: 7 }), h.hooks);
      const res = await post(fastify);
      expect([res.statusCode, res.body]).toEqual([201, '{"id":7}']);
    }
  });

  it('records once, and not at all once stopped', async () => {
    const h = hooks();
    let second: Promise<unknown> | undefined;
    const fastify = await app((reply) => {
      reply.send('first');
      second = Promise.resolve(reply.send('second')); // Fastify refuses it; no second record either
      return reply;
    }, h.hooks);
    await post(fastify);
    await second;
    expect(h.stored).toHaveLength(1);

    const stopped = hooks();
    const other = Fastify();
    installReplyRecorder(other);
    other.post('/', (_req, reply) => {
      recordReply(reply, {}, stopped.hooks).stop();
      return reply.send('untouched');
    });
    apps.push(other);
    expect((await post(other)).body).toBe('untouched');
    expect(stopped.stored).toEqual([]);
  });

  it('knows a reply of an application without the hook, which the raw recorder must record', async () => {
    const plain = Fastify();
    let seen: boolean[] = [];
    plain.post('/', (_req, reply) => ((seen = [canRecordReply(reply)]), reply.send('')));
    const hooked = Fastify();
    installReplyRecorder(hooked);
    hooked.post('/', (_req, reply) => (seen.push(canRecordReply(reply)), reply.send('')));
    apps.push(plain, hooked);
    await post(plain);
    await post(hooked);
    expect(seen).toEqual([false, true]);
  });
});
