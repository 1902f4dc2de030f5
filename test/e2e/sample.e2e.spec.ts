import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { AppModule } from '../../sample/app.module.js';
import { DatabaseService } from '../../sample/database.service.js';
import { ADAPTERS, startApp } from '../support/app.js';

const ALICE = 'Bearer alice-token';
const BOB = 'Bearer bob-token';

describe.each(ADAPTERS)('sample payments API, attack list (docs/attacks.md), on %s', (adapter) => {
  let app: INestApplication;
  let db: DatabaseService;
  beforeAll(async () => {
    app = await startApp(
      adapter,
      { imports: [AppModule.register({ databasePath: ':memory:' })] },
      { configure: (a) => a.setGlobalPrefix('api') },
    );
    db = app.get(DatabaseService);
  });
  afterAll(() => app.close());

  const pay = (key: string, body: unknown, auth = ALICE) =>
    request(app.getHttpServer())
      .post('/api/payments')
      .set('Authorization', auth)
      .set('Idempotency-Key', key)
      .send(body as object);

  it('ATK-04: ten retries of one payment leave exactly one row', async () => {
    const texts = new Set<string>();
    for (let i = 0; i < 10; i++) {
      const res = await pay('atk-04', { amount: 1000, currency: 'USD' });
      expect(res.status).toBe(201);
      texts.add(res.text);
    }
    expect(texts.size).toBe(1);
    expect(db.paymentCountsByKey().get('atk-04')).toBe(1);
  });

  it.each([
    ['ATK-02 SQL in amount', { amount: '1; DROP TABLE payments;', currency: 'EUR' }, 'amount must be an integer'],
    ['ATK-10 integer overflow', JSON.parse('{"amount":9999999999999999999,"currency":"EUR"}'), 'amount must be an integer'],
    ['ATK-11 null amount', { amount: null, currency: 'EUR' }, 'amount must be an integer'],
    ['amount as a string', { amount: '1000', currency: 'EUR' }, 'amount must be an integer'],
    ['amount over the bound', { amount: 100_000_001, currency: 'EUR' }, 'amount must be between 1 and 100000000'],
    ['zero amount', { amount: 0, currency: 'EUR' }, 'amount must be between 1 and 100000000'],
    ['fractional amount', { amount: 10.5, currency: 'EUR' }, 'amount must be an integer'],
    ['bad currency', { amount: 10, currency: 'euro' }, 'currency must be a three-letter ISO code'],
  ])('%s is a 422 with no row written', async (_, body, error) => {
    const before = db.payments('acct_alice').length;
    const res = await pay(`bad-${Math.random()}`, body);
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ error });
    expect(db.payments('acct_alice').length).toBe(before);
  });

  it('a 422 thrown by validation frees the key, so the corrected request can use it', async () => {
    const bad = await pay('fix-me', { amount: null, currency: 'EUR' });
    expect(bad.status).toBe(422);
    const again = await pay('fix-me', { amount: null, currency: 'EUR' });
    expect(again.status).toBe(422);
    const fixed = await pay('fix-me', { amount: 5, currency: 'EUR' });
    expect(fixed.status).toBe(201);
  });

  it('ATK-07: a negative quantity is a 422', async () => {
    const res = await request(app.getHttpServer())
      .post('/api/orders')
      .set('Authorization', ALICE)
      .set('Idempotency-Key', 'atk-07')
      .send({ item: 'widget', quantity: -5 });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ error: 'quantity must be between 1 and 1000' });
  });

  it('ATK-03 / ATK-08: SQL and HTML in item are stored literally and returned as JSON', async () => {
    for (const item of ["' OR 1=1; --", '<script>alert(1)</script>']) {
      const res = await request(app.getHttpServer())
        .post('/api/orders')
        .set('Authorization', ALICE)
        .set('Idempotency-Key', `literal-${item.length}`)
        .send({ item, quantity: 1 });
      expect(res.status).toBe(201);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.body.item).toBe(item);
    }
    const stored = db.orders('acct_alice').map((o) => o.item);
    expect(stored).toEqual(expect.arrayContaining(["' OR 1=1; --", '<script>alert(1)</script>']));
  });

  it("keys are scoped per account: Bob reusing Alice's key gets his own payment", async () => {
    const alice = await pay('shared-key', { amount: 10, currency: 'EUR' });
    const bob = await pay('shared-key', { amount: 10, currency: 'EUR' }, BOB);
    expect(bob.status).toBe(201);
    expect(bob.headers['idempotent-replayed']).toBeUndefined();
    expect(bob.body.id).not.toBe(alice.body.id);
    expect(db.payments('acct_bob')).toHaveLength(1);
  });

  it('an unauthenticated request is refused by the guard before any key is claimed', async () => {
    const res = await request(app.getHttpServer())
      .post('/api/payments')
      .set('Idempotency-Key', 'anon')
      .send({ amount: 1, currency: 'EUR' });
    expect(res.status).toBe(401);
    const ok = await pay('anon', { amount: 1, currency: 'EUR' });
    expect(ok.status).toBe(201);
  });
});
