import { describe, expect, it } from '@jest/globals';
import { Controller, Post } from '@nestjs/common';
import request from 'supertest';
import { IdempotencyException, IdempotencyModule, Idempotent } from '../../lib/index.js';
import { ADAPTERS, useApps } from '../support/app.js';

let runs = 0;

@Controller('own')
class OwnController {
  @Post()
  @Idempotent()
  go() {
    runs++;
    throw new IdempotencyException(409, 'the ledger is busy');
  }
}

// The module's filter took every IdempotencyException as one the interceptor had written already: one
// a handler threw itself was written by nobody, and the request hung until the client gave up.
describe.each(ADAPTERS)('an IdempotencyException a handler throws itself, on %s', (adapter) => {
  const start = useApps();

  it('is answered as the module answers its own, and frees the key like any error', async () => {
    runs = 0;
    const app = await start(adapter, { imports: [IdempotencyModule.forRoot({})], controllers: [OwnController] });
    for (let i = 0; i < 2; i++) {
      const res = await request(app.getHttpServer()).post('/own').set('Idempotency-Key', 'own-1').timeout(10_000);
      expect([res.status, res.text]).toEqual([409, '{"error":"the ledger is busy"}']);
    }
    expect(runs).toBe(2);
  });
});
