import { beforeEach, describe, expect, it, jest } from '@jest/globals';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import type { StoredResponse } from '../../lib/stores/index.js';
import { type RecorderHooks, recordResponse } from '../../lib/transports/http/response.recorder.js';
import { FakeResponse } from '../support/fake-response.js';
import { tick } from '../support/timing.js';

type Mode = 'by prototype' | 'own methods';

/**
 * A response as the recorder meets it: methods on the prototype (Node, Express), or own properties a
 * middleware put there (compression, express-session), which the recorder must wrap in turn.
 */
function fakeResponse(mode: Mode): FakeResponse {
  const res = new FakeResponse();
  if (mode === 'own methods') {
    for (const name of ['writeHead', 'write', 'end'] as const) {
      const inner = FakeResponse.prototype[name] as (...a: unknown[]) => unknown;
      (res as unknown as Record<string, unknown>)[name] = function (this: FakeResponse, ...args: unknown[]) {
        return inner.apply(this, args);
      };
    }
  }
  return res;
}

let mode: Mode = 'by prototype';

/**
 * Own methods are put back as they were; a recording prototype stays (it passes through, as the
 * tests' later calls show), and no own method is left behind.
 */
function expectPutBack(res: FakeResponse, originals: Pick<FakeResponse, 'writeHead' | 'write' | 'end'>) {
  for (const name of ['writeHead', 'write', 'end'] as const) {
    if (mode === 'own methods') expect(res[name]).toBe(originals[name]);
    else expect(Object.hasOwn(res, name)).toBe(false);
  }
}

function recorder(onEnd: (r: StoredResponse) => Promise<void> = async () => undefined, before: Record<string, unknown> = {}) {
  const res = fakeResponse(mode);
  const originals = { writeHead: res.writeHead, write: res.write, end: res.end };
  const stored: StoredResponse[] = [];
  const onStream = jest.fn();
  const recording = recordResponse(res.raw, before, {
    onEnd: (r: StoredResponse) => {
      stored.push(r);
      return onEnd(r);
    },
    onStream,
  });
  return { res, originals, stored, onStream, recording };
}

describe.each<Mode>(['by prototype', 'own methods'])('recordResponse, methods %s', (current) => {
  beforeEach(() => {
    mode = current;
  });

  it('leaves out headers the response held before the handler ran, unless their value changed', async () => {
    const before = {
      'access-control-allow-origin': 'https://a.example',
      'x-request-id': 'r-1',
      'x-tags': ['a', 'b'],
      vary: 'Origin',
    };
    const { res, stored } = recorder(undefined, before);
    for (const [name, value] of Object.entries(before)) res.setHeader(name, value);
    res.setHeader('vary', 'Origin, Accept');
    res.setHeader('x-new', '1');
    res.raw.writeHead(200, ['x-request-id', 'r-1', 'x-head', '2']);
    res.raw.end();
    await tick();
    expect(stored[0].headers).toEqual({ vary: 'Origin, Accept', 'x-new': '1', 'x-head': '2' });
  });

  it('stores status, set headers (lower case) and the body given to end()', async () => {
    const { res, stored } = recorder();
    res.statusCode = 201;
    res.setHeader('Content-Type', 'application/json');
    res.setHeader('X-Count', 3);
    res.setHeader('X-Tags', ['a', 1]);
    res.raw.end('{"ok":true}');
    expect(stored).toEqual([
      {
        status: 201,
        headers: { 'content-type': 'application/json', 'x-count': '3', 'x-tags': ['a', '1'] },
        body: Buffer.from('{"ok":true}'),
      },
    ]);
  });

  it.each([
    'connection',
    'keep-alive',
    'proxy-authenticate',
    'proxy-authorization',
    'proxy-connection',
    'te',
    'trailer',
    'transfer-encoding',
    'upgrade',
    'content-length',
    'date',
    'set-cookie',
  ])('never stores %s', (name) => {
    const { res, stored } = recorder();
    res.setHeader(name.toUpperCase(), 'v');
    res.setHeader('etag', '"1"');
    res.raw.writeHead(200, { [name]: 'v', location: '/x' });
    res.raw.end();
    expect(stored[0].headers).toEqual({ etag: '"1"', location: '/x' });
  });

  it('takes headers from writeHead(status, headers), writeHead(status, reason, headers) and raw arrays', () => {
    const a = recorder();
    a.res.raw.writeHead(202, { 'X-A': '1', 'x-skip': undefined as never });
    a.res.raw.end();
    expect(a.stored[0].headers).toEqual({ 'x-a': '1' });
    expect(a.stored[0].status).toBe(202);
    expect(a.res.calls[0]).toEqual({ method: 'writeHead', args: [202, { 'X-A': '1', 'x-skip': undefined }] });

    const b = recorder();
    b.res.raw.writeHead(203, 'Fine', { 'X-B': '2' });
    b.res.raw.end();
    expect(b.stored[0]).toMatchObject({ status: 203, headers: { 'x-b': '2' } });
    expect(b.res.calls[0]).toEqual({ method: 'writeHead', args: [203, 'Fine', { 'X-B': '2' }] });

    const c = recorder();
    c.res.raw.writeHead(204, ['X-C', '3', 'X-D', ['4', '5'], 'X-Odd']);
    c.res.raw.end();
    expect(c.stored[0]).toMatchObject({ status: 204, headers: { 'x-c': '3', 'x-d': ['4', '5'] } });
    expect(Object.keys(c.stored[0].headers)).toEqual(['x-c', 'x-d']);

    const d = recorder();
    d.res.raw.writeHead(205);
    d.res.raw.end();
    expect(d.stored[0]).toEqual({ status: 205, headers: {}, body: Buffer.alloc(0) });
  });

  it('lets writeHead() headers win over setHeader() ones', () => {
    const { res, stored } = recorder();
    res.setHeader('x-v', 'set');
    res.setHeader('x-only-set', 'kept');
    res.raw.writeHead(200, { 'x-v': 'head' });
    res.raw.end();
    expect(stored[0].headers).toEqual({ 'x-v': 'head', 'x-only-set': 'kept' });
  });

  it('turns every kind of end() chunk into the bytes that go out', () => {
    const body = (...args: unknown[]) => {
      const { res, stored } = recorder();
      (res.raw.end as (...a: unknown[]) => void)(...args);
      return stored[0].body;
    };
    expect(body()).toEqual(Buffer.alloc(0));
    expect(body(null)).toEqual(Buffer.alloc(0));
    expect(body(() => undefined)).toEqual(Buffer.alloc(0));
    expect(body(Buffer.from([1, 2]))).toEqual(Buffer.from([1, 2]));
    expect(body('ü')).toEqual(Buffer.from('ü', 'utf8'));
    expect(body('ü', 'latin1')).toEqual(Buffer.from([0xfc]));
    expect(body('6869', 'hex')).toEqual(Buffer.from('hi'));
    expect(body('ü', () => undefined)).toEqual(Buffer.from('ü', 'utf8'));
    expect(body(new Uint8Array([7, 8]))).toEqual(Buffer.from([7, 8]));
    expect(body(42)).toEqual(Buffer.from('42'));
    const buffer = Buffer.from('same');
    expect(body(buffer)).toBe(buffer);
  });

  it('holds the real end() back until the record is stored, then passes its arguments on', async () => {
    let store!: () => void;
    const { res, originals } = recorder(() => new Promise<void>((r) => (store = r)));
    const callback = () => undefined;
    expect(res.raw.end('body', 'utf8', callback)).toBe(res);
    await tick();
    expect(res.ended()).toBe(false);
    store();
    await tick();
    expect(res.calls).toEqual([{ method: 'end', args: ['body', 'utf8', callback] }]);
    expectPutBack(res, originals);
  });

  it('still ends the response when storing fails', async () => {
    const { res } = recorder(() => Promise.reject(new Error('store down')));
    res.raw.end('x');
    await tick();
    expect(res.calls).toEqual([{ method: 'end', args: ['x', undefined, undefined] }]);
  });

  it('gives up on a streamed response: write() restores the response and reports the stream', () => {
    const { res, originals, stored, onStream } = recorder();
    expect(res.raw.write('part', 'utf8')).toBe(true);
    expect(onStream).toHaveBeenCalledTimes(1);
    expect(res.calls).toEqual([{ method: 'write', args: ['part', 'utf8'] }]);
    expectPutBack(res, originals);
    res.raw.write('more');
    res.raw.end();
    expect(onStream).toHaveBeenCalledTimes(1);
    expect(stored).toEqual([]);
  });

  it('stop() restores the response and records nothing; a second stop() changes nothing', () => {
    const { res, originals, stored, recording } = recorder();
    recording.stop();
    expectPutBack(res, originals);
    res.raw.end('x');
    expect(stored).toEqual([]);
    res.end = (() => 'replaced by someone else') as never;
    recording.stop();
    expect((res.end as unknown as () => string)()).toBe('replaced by someone else');
  });

  describe('holding the head back (transactional routes)', () => {
    function held(onEnd: (r: StoredResponse) => Promise<StoredResponse | void>) {
      const res = fakeResponse(mode);
      const onStream = jest.fn();
      const stored: StoredResponse[] = [];
      recordResponse(res.raw, { 'x-request-id': 'r-1' }, { onEnd: (r) => (stored.push(r), onEnd(r)), onStream }, true);
      res.setHeader('x-request-id', 'r-1');
      return { res, stored, onStream };
    }

    it('writes the head Fastify gave just before end() only once onEnd has settled, and records its status', async () => {
      let settle!: () => void;
      const { res, stored } = held(() => new Promise<void>((r) => (settle = r)));
      res.raw.writeHead(201, { 'content-type': 'text/plain' });
      res.raw.end('paid', 'utf8');
      expect(res.calls).toEqual([]);
      expect(stored[0]).toEqual({ status: 201, headers: { 'content-type': 'text/plain' }, body: Buffer.from('paid') });
      settle();
      await tick();
      expect(res.calls).toEqual([
        { method: 'writeHead', args: [201, { 'content-type': 'text/plain' }] },
        { method: 'end', args: ['paid', 'utf8', undefined] },
      ]);
    });

    it('holds no head once stopped: a later writeHead goes out at once', () => {
      const res = fakeResponse(mode);
      const recording = recordResponse(res.raw, {}, { onEnd: () => Promise.resolve(), onStream: () => undefined }, true);
      const writeHead = res.raw.writeHead as (...a: unknown[]) => unknown; // an own-method stand-in stays callable
      recording.stop();
      writeHead.call(res.raw, 500);
      expect(res.calls).toEqual([{ method: 'writeHead', args: [500] }]);
    });

    it('drops the held head when another writer answered while onEnd was pending (Node would throw)', async () => {
      let settle!: () => void;
      const { res } = held(() => new Promise<void>((r) => (settle = r)));
      res.raw.writeHead(201, { 'content-type': 'text/plain' });
      res.raw.end('paid');
      res.raw.writeHead(503); // a timeout middleware answers meanwhile
      res.raw.end('timed out');
      settle();
      await tick();
      expect(res.calls.filter((c) => c.method === 'writeHead')).toEqual([{ method: 'writeHead', args: [503] }]);
    });

    it('sends the response onEnd resolves to instead: only the headers set before the handler stay', async () => {
      const instead: StoredResponse = { status: 503, headers: { 'retry-after': '1' }, body: Buffer.from('{"error":"no"}') };
      const { res } = held(() => Promise.resolve(instead));
      res.setHeader('content-length', '4');
      res.setHeader('etag', 'W/"x"');
      res.raw.writeHead(201, { 'content-type': 'text/plain' });
      res.raw.end('paid');
      await tick();
      expect(res.statusCode).toBe(503);
      expect(res.getHeaders()).toEqual({ 'x-request-id': 'r-1', 'retry-after': '1', 'content-length': 14 });
      expect(res.calls).toEqual([{ method: 'end', args: [Buffer.from('{"error":"no"}')] }]);
    });

    it('a replacement for a response whose head already went out is not sent: the original ends it', async () => {
      const res = fakeResponse(mode);
      recordResponse(
        res.raw,
        {},
        { onEnd: () => Promise.resolve({ status: 503, headers: {}, body: Buffer.alloc(0) }), onStream: () => undefined },
      );
      res.raw.writeHead(201);
      res.raw.end('paid');
      await tick();
      expect(res.calls.map((c) => c.method)).toEqual(['writeHead', 'end']);
      expect(res.statusCode).toBe(201);
    });

    it('a write releases the held head first, then reports the stream', () => {
      const { res, onStream } = held(() => Promise.resolve());
      res.raw.writeHead(200, { 'content-type': 'text/plain' });
      res.raw.write('part');
      expect(res.calls.map((c) => c.method)).toEqual(['writeHead', 'write']);
      expect(onStream).toHaveBeenCalledTimes(1);
    });
  });
});

describe('recordResponse, how it stands in for the methods', () => {
  const hooks = (onEnd: RecorderHooks['onEnd'] = () => Promise.resolve()): RecorderHooks => ({
    onEnd,
    onStream: () => undefined,
  });

  it('stands in on the prototype, once: a response gets no own property and keeps its prototype; one not recorded, or stopped, passes straight through', async () => {
    const [a, b, c] = [new FakeResponse(), new FakeResponse(), new FakeResponse()];
    const ownKeys = Reflect.ownKeys(a);
    const stored: StoredResponse[] = [];
    recordResponse(
      a.raw,
      {},
      hooks((r) => (stored.push(r), Promise.resolve())),
    );
    const recordingB = recordResponse(
      b.raw,
      {},
      hooks((r) => (stored.push(r), Promise.resolve())),
    );
    // Nothing on the responses themselves: every response keeps one shape.
    expect(Reflect.ownKeys(a)).toEqual(ownKeys);
    expect(Reflect.ownKeys(b)).toEqual(ownKeys);
    expect(Object.getPrototypeOf(a)).toBe(FakeResponse.prototype);
    expect(Object.getPrototypeOf(b)).toBe(FakeResponse.prototype);
    const standIn = FakeResponse.prototype.end;
    recordResponse(new FakeResponse().raw, {}, hooks()).stop();
    expect(FakeResponse.prototype.end).toBe(standIn); // put on the prototype once
    a.raw.end('x');
    recordingB.stop();
    b.raw.writeHead(201);
    b.raw.write('w');
    b.raw.end('y');
    c.raw.end('z');
    await tick();
    a.raw.end('again');
    expect(stored.map((r) => r.body.toString())).toEqual(['x']);
    expect(a.calls).toEqual([
      { method: 'end', args: ['x', undefined, undefined] },
      { method: 'end', args: ['again'] },
    ]);
    expect(b.calls).toEqual([
      { method: 'writeHead', args: [201] },
      { method: 'write', args: ['w'] },
      { method: 'end', args: ['y'] },
    ]);
    expect(c.calls).toEqual([{ method: 'end', args: ['z'] }]);
    expect(Reflect.ownKeys(a)).toEqual(ownKeys);
    expect(Reflect.ownKeys(b)).toEqual(ownKeys);
  });

  it('a stand-in kept and called after the response was re-pointed at another prototype passes through', async () => {
    class Other extends FakeResponse {}
    const res = new FakeResponse();
    const stored: StoredResponse[] = [];
    const recording = recordResponse(
      res.raw,
      {},
      hooks((r) => (stored.push(r), Promise.resolve())),
    );
    const [writeHead, write, end] = [res.raw.writeHead, res.raw.write, res.raw.end] as ((...a: unknown[]) => unknown)[];
    Object.setPrototypeOf(res, Other.prototype);
    recording.stop();
    writeHead.call(res.raw, 202);
    write.call(res.raw, 'a');
    end.call(res.raw, 'b');
    await tick();
    expect(stored).toEqual([]);
    expect(res.calls.map((c) => [c.method, c.args[0]])).toEqual([
      ['writeHead', 202],
      ['write', 'a'],
      ['end', 'b'],
    ]);
  });

  it('an own-method stand-in kept and called after its recording stopped passes through, recording nothing', async () => {
    const res = fakeResponse('own methods');
    const stored: StoredResponse[] = [];
    const onStream = jest.fn();
    const recording = recordResponse(res.raw, {}, { onEnd: (r) => (stored.push(r), Promise.resolve()), onStream });
    const [writeHead, write, end] = [res.raw.writeHead, res.raw.write, res.raw.end] as ((...a: unknown[]) => unknown)[];
    recording.stop();
    writeHead.call(res.raw, 202);
    write.call(res.raw, 'a');
    end.call(res.raw, 'b');
    await tick();
    expect(stored).toEqual([]);
    expect(onStream).not.toHaveBeenCalled();
    expect(res.calls.map((c) => [c.method, c.args[0]])).toEqual([
      ['writeHead', 202],
      ['write', 'a'],
      ['end', 'b'],
    ]);
  });

  it("gives a response still on Node's own prototype (Fastify's) own methods, and puts them back", async () => {
    const res = new ServerResponse(new IncomingMessage(new Socket()));
    const stored: StoredResponse[] = [];
    const recording = recordResponse(
      res,
      {},
      hooks((r) => (stored.push(r), Promise.resolve())),
    );
    expect(Object.getPrototypeOf(res)).toBe(ServerResponse.prototype);
    expect(['writeHead', 'write', 'end'].map((name) => Object.hasOwn(res, name))).toEqual([true, true, true]);
    recording.stop();
    expect(res.end).toBe(ServerResponse.prototype.end);
    expect(res.write).toBe(ServerResponse.prototype.write);
    expect(res.writeHead).toBe(ServerResponse.prototype.writeHead);
    recordResponse(
      res,
      {},
      hooks((r) => (stored.push(r), Promise.resolve())),
    );
    res.statusCode = 202;
    res.end('x');
    await tick();
    expect(stored).toEqual([{ status: 202, headers: {}, body: Buffer.from('x') }]);
  });

  it.each(['writeHead', 'write', 'end'] as const)(
    'wraps the methods in turn when only %s is an own property (on-headers wraps writeHead alone)',
    async (name) => {
      const res = new FakeResponse();
      const inner = FakeResponse.prototype[name] as (...a: unknown[]) => unknown;
      const wrapper = function (this: FakeResponse, ...args: unknown[]) {
        return inner.apply(this, args);
      };
      (res as unknown as Record<string, unknown>)[name] = wrapper;
      const stored: StoredResponse[] = [];
      const recording = recordResponse(
        res.raw,
        {},
        hooks((r) => (stored.push(r), Promise.resolve())),
      );
      expect(Object.getPrototypeOf(res)).toBe(FakeResponse.prototype);
      expect(['writeHead', 'write', 'end'].every((m) => Object.hasOwn(res, m))).toBe(true);
      recording.stop();
      expect(res[name]).toBe(wrapper);
      recordResponse(
        res.raw,
        {},
        hooks((r) => (stored.push(r), Promise.resolve())),
      );
      res.raw.end('x');
      await tick();
      expect(stored.map((r) => r.body.toString())).toEqual(['x']);
    },
  );

  it('records a response recorded twice at once (two interceptors) in both, the inner one first, and ends it once', async () => {
    const res = new FakeResponse();
    const order: string[] = [];
    recordResponse(
      res.raw,
      {},
      hooks(async (r) => void order.push(`outer ${r.body.toString()}`)),
    );
    recordResponse(
      res.raw,
      {},
      hooks(async (r) => void order.push(`inner ${r.body.toString()}`)),
    );
    res.raw.end('x');
    for (let i = 0; i < 5; i++) await tick();
    expect(order).toEqual(['inner x', 'outer x']);
    expect(res.calls).toEqual([{ method: 'end', args: ['x', undefined, undefined] }]);
  });
});
