import { describe, expect, it } from '@jest/globals';
import { Body, Controller, Post } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import fastifyCompress from '@fastify/compress';
import { gunzipSync } from 'node:zlib';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { listen, useApps } from '../support/app.js';
import { Runs } from '../support/fixtures.js';
import { request as httpRequest } from 'node:http';

@Controller('reports')
class ReportsController {
  constructor(private readonly runs: Runs) {}

  @Post()
  @Idempotent()
  create(@Body() body: { rows: number }) {
    this.runs.hit('report');
    return { rows: Array.from({ length: body.rows }, (_, i) => ({ i, text: 'a row of a report that compresses well' })) };
  }
}

/** A POST whose answer is read as bytes, undecoded (fetch and supertest would decode it). */
function post(base: string, key: string, acceptEncoding: string) {
  return new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }>(
    (resolve, reject) => {
      const req = httpRequest(
        `${base}/reports`,
        {
          method: 'POST',
          headers: { 'idempotency-key': key, 'content-type': 'application/json', 'accept-encoding': acceptEncoding },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ rows: 200 }));
    },
  );
}

// H25 (issue 22 item 11): with @fastify/compress the compressed bytes were stored, and a retry
// that asked for identity got `content-encoding: gzip`.
describe('Fastify with @fastify/compress', () => {
  const start = useApps();

  // Registered without await, the plugin's onSend hook is added when Fastify boots, after the
  // module's; awaited (as Nest's documentation does it), before it, and the module sees the stream.
  it.each([
    ['registered without await', (a: NestFastifyApplication) => void a.register(fastifyCompress, { threshold: 0 })],
    ['registered with await', (a: NestFastifyApplication) => a.register(fastifyCompress, { threshold: 0 })],
  ])('stores the identity representation: each retry gets the encoding it negotiated, with Vary (%s)', async (_, register) => {
    const app = await start(
      'fastify',
      { imports: [IdempotencyModule.forRoot()], controllers: [ReportsController], providers: [Runs] },
      { configure: (a) => register(a as NestFastifyApplication) },
    );
    const base = await listen(app);
    const first = await post(base, 'r1', 'gzip');
    expect(first.status).toBe(201);
    expect(first.headers['content-encoding']).toBe('gzip');
    const plain = gunzipSync(first.body).toString();
    expect(JSON.parse(plain).rows).toHaveLength(200);

    const identity = await post(base, 'r1', 'identity');
    expect(identity.headers['idempotent-replayed']).toBe('true');
    expect(identity.headers['content-encoding']).toBeUndefined();
    expect(identity.body.toString()).toBe(plain);

    const gzip = await post(base, 'r1', 'gzip');
    expect(gzip.headers['idempotent-replayed']).toBe('true');
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(String(gzip.headers.vary)).toMatch(/accept-encoding/i);
    expect(gunzipSync(gzip.body).toString()).toBe(plain);
    expect(app.get(Runs).of('report')).toBe(1);
  });
});
