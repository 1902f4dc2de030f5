import { describe, expect, it } from '@jest/globals';
import { Body, Controller, HostParam, Post } from '@nestjs/common';
import request from 'supertest';
import { Idempotent, IdempotencyAdmin, IdempotencyModule } from '../../lib/index.js';
import { ADAPTERS, useApps } from '../support/app.js';
import { Runs } from '../support/fixtures.js';

@Controller({ path: 'orders', host: ':tenant.example.com' })
class TenantOrdersController {
  constructor(private readonly runs: Runs) {}

  @Post()
  @Idempotent()
  create(@HostParam('tenant') tenant: string, @Body() body: { sku: string }) {
    return { tenant, sku: body.sku, run: this.runs.hit(tenant) };
  }
}

// H18 (issue 22 item 3): on a host-routed controller, globex's POST with acme's key and body got
// acme's response as a replay, and globex's order was never placed.
describe.each(ADAPTERS)('host-routed controllers on %s', (adapter) => {
  const start = useApps();

  it("keeps each host's keys apart: the same key and body on another tenant runs for that tenant", async () => {
    const app = await start(adapter, {
      imports: [IdempotencyModule.forRoot()],
      controllers: [TenantOrdersController],
      providers: [Runs],
    });
    const post = (host: string) =>
      request(app.getHttpServer()).post('/orders').set('Host', host).set('Idempotency-Key', 'K').send({ sku: 'x' });
    const acme = await post('acme.example.com');
    expect(acme.status).toBe(201);
    expect(acme.body).toEqual({ tenant: 'acme', sku: 'x', run: 1 });
    const globex = await post('globex.example.com:8443');
    expect(globex.status).toBe(201);
    expect(globex.headers['idempotent-replayed']).toBeUndefined();
    expect(globex.body).toEqual({ tenant: 'globex', sku: 'x', run: 1 });
    // Each tenant's retry replays its own response; host names are matched case-insensitively.
    const again = await post('ACME.example.com');
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(acme.body);
    expect((await post('globex.example.com')).body).toEqual(globex.body);
    const runs = app.get(Runs);
    expect([runs.of('acme'), runs.of('globex')]).toEqual([1, 1]);
    // Not found under the plain key: the record lives under the host's scope.
    expect(await app.get(IdempotencyAdmin).inspect('K')).toBeUndefined();
  });
});
