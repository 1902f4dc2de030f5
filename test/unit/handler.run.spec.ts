import { describe, expect, it, jest } from '@jest/globals';
import { Logger, StreamableFile } from '@nestjs/common';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { Observable, of } from 'rxjs';
import type { StoredResponse } from '../../lib/stores/index.js';
import { HandlerRun, responseStart } from '../../lib/transports/http/handler.run.js';
import { FakeResponse } from '../support/fake-response.js';
import { tick } from '../support/timing.js';

type Adapter = 'express' | 'fastify';

/** A run on a fake response, as either adapter hands it to an interceptor; what `ended` was given is kept. */
function runOn(adapter: Adapter, holdBack?: boolean) {
  const fake = new FakeResponse();
  const response =
    adapter === 'fastify' ? { raw: fake.raw, code: () => undefined, getHeaders: () => fake.getHeaders() } : fake.raw;
  const kept: StoredResponse[] = [];
  const settlement = { ended: async (k: StoredResponse) => void kept.push(k), streamed: jest.fn() };
  const run = new HandlerRun(responseStart(response), 'POST /pay', new Logger('test'), settlement, holdBack);
  return { fake, run, kept, settlement };
}

/** Runs a handler that emits `value` and completes. */
function handle(run: HandlerRun, value: unknown): void {
  new Observable((subscriber) =>
    run.subscribe({ handle: () => of(value) }, subscriber, {
      stream: () => true,
      error: () => undefined,
      complete: () => undefined,
    }),
  ).subscribe();
}

const gzipped = () => gzipSync(Buffer.from('{"paid":true}'));

describe('HandlerRun', () => {
  it("keeps Fastify's encoded body as its identity representation, and what Express sent as it went out", async () => {
    for (const adapter of ['express', 'fastify'] as const) {
      const { fake, run, kept } = runOn(adapter);
      handle(run, { paid: true });
      fake.setHeader('content-encoding', 'gzip');
      fake.end(gzipped());
      await tick();
      expect(kept).toHaveLength(1);
      if (adapter === 'fastify') {
        expect(kept[0].headers['content-encoding']).toBeUndefined();
        expect(kept[0].body.toString()).toBe('{"paid":true}');
      } else {
        expect(kept[0].headers['content-encoding']).toBe('gzip');
        expect(kept[0].body.equals(gzipped())).toBe(true);
      }
    }
  });

  it('says a streamed body was encoded by Fastify only for a finished handler whose value is no stream, on Fastify, with a Content-Encoding', () => {
    const fastify = runOn('fastify');
    fastify.fake.setHeader('content-encoding', 'gzip');
    expect(fastify.run.encodedByFastify()).toBe(false);
    handle(fastify.run, { paid: true });
    expect(fastify.run.encodedByFastify()).toBe(true);

    const plain = runOn('fastify');
    handle(plain.run, { paid: true });
    expect(plain.run.encodedByFastify()).toBe(false);

    const stream = runOn('fastify');
    stream.fake.setHeader('content-encoding', 'gzip');
    handle(stream.run, new StreamableFile(Readable.from(['x'])));
    expect(stream.run.encodedByFastify()).toBe(false);

    const express = runOn('express');
    express.fake.setHeader('content-encoding', 'gzip');
    handle(express.run, { paid: true });
    expect(express.run.encodedByFastify()).toBe(false);
  });

  it('lets writeHead() through at once unless told to hold it back', async () => {
    const passing = runOn('express');
    passing.fake.writeHead(201);
    expect(passing.fake.calls.map((c) => c.method)).toEqual(['writeHead']);

    const holding = runOn('express', true);
    holding.fake.writeHead(201);
    expect(holding.fake.calls).toEqual([]);
    handle(holding.run, 'ok');
    holding.fake.end('ok');
    await tick();
    expect(holding.fake.calls.map((c) => c.method)).toEqual(['writeHead', 'end']);
  });
});
