import { describe, expect, it } from '@jest/globals';
import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import request from 'supertest';
import { IdempotencyModule, Idempotent } from '../../lib/index.js';
import { ADAPTERS, useApps } from '../support/app.js';
import { spyOnLogger } from '../support/logger.js';

let runs = 0;

@Controller('pay')
class PayController {
  @Post()
  @HttpCode(201)
  @Idempotent()
  raw(@Body() body: unknown) {
    return { run: ++runs, body };
  }

  @Post('canonical')
  @HttpCode(201)
  @Idempotent({ fingerprint: 'canonical' })
  canonical(@Body() body: unknown) {
    return { run: ++runs, body };
  }
}

let seq = 0;
const newKey = () => `fp-${Date.now()}-${++seq}`;

describe.each(ADAPTERS)("fingerprint: 'raw' on %s", (adapter) => {
  const start = useApps();
  const log = spyOnLogger();
  const app = (rawBody: boolean) =>
    start(adapter, { imports: [IdempotencyModule.forRoot({ fingerprint: 'raw' })], controllers: [PayController] }, { rawBody });
  const post = (server: unknown, path: string, key: string, text: string) =>
    request(server as never)
      .post(path)
      .set('Idempotency-Key', key)
      .set('content-type', 'application/json')
      .send(text);

  it('replays the same bytes; the same data in another key order or spacing is another request (422)', async () => {
    const server = (await app(true)).getHttpServer();
    const key = newKey();
    const first = await post(server, '/pay', key, '{"amount":1,"currency":"EUR"}');
    expect(first.status).toBe(201);
    const again = await post(server, '/pay', key, '{"amount":1,"currency":"EUR"}');
    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect((await post(server, '/pay', key, '{"currency":"EUR","amount":1}')).status).toBe(422);
    expect((await post(server, '/pay', key, '{"amount": 1, "currency": "EUR"}')).status).toBe(422);
    expect(log.warnings).not.toHaveBeenCalled();
  });

  it("a route's own fingerprint: 'canonical' replays the same data in another key order", async () => {
    const server = (await app(true)).getHttpServer();
    const key = newKey();
    const first = await post(server, '/pay/canonical', key, '{"amount":1,"currency":"EUR"}');
    const reordered = await post(server, '/pay/canonical', key, '{ "currency": "EUR", "amount": 1 }');
    expect(reordered.status).toBe(201);
    expect(reordered.text).toBe(first.text);
    expect(reordered.headers['idempotent-replayed']).toBe('true');
  });

  it('without rawBody: true, fingerprints the parsed body and says once how to keep the bytes', async () => {
    const server = (await app(false)).getHttpServer();
    const key = newKey();
    const first = await post(server, '/pay', key, '{"amount":1,"currency":"EUR"}');
    const reordered = await post(server, '/pay', key, '{"currency":"EUR","amount":1}');
    expect(reordered.status).toBe(201);
    expect(reordered.text).toBe(first.text);
    await post(server, '/pay', newKey(), '{"amount":2}');
    expect(log.warnings).toHaveBeenCalledTimes(1);
    expect(String(log.warnings.mock.calls[0][0])).toContain('rawBody: true');
  });
});
