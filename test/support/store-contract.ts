import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { IdempotencyRecord, IdempotencyStore } from '../../lib/index.js';
import { sleep } from './timing.js';

/** Binary, newlines and non-ASCII: what a store must keep byte for byte. */
export const sampleRecord = (fingerprint: string): IdempotencyRecord => ({
  fingerprint,
  response: {
    status: 402,
    headers: { 'content-type': 'application/octet-stream', location: '/p/1', 'x-multi': ['a', 'b'], 'x-text': 'ü\n?' },
    body: Buffer.from([0, 10, 13, 0x52, 0x43, 0xff, 0xfe, 10, 0x7b]),
  },
});

/**
 * The store contract, run against every IdempotencyStore. Expiry uses real short leases (≤ 600 ms),
 * as a Redis server keeps its own clock.
 */
export function storeContract(
  name: string,
  open: () => Promise<IdempotencyStore>,
  close: () => Promise<void> = async () => {},
  /** Writes `value` as the record under `key` the way the store keeps records, bypassing the codec (a newer release's). */
  plant?: (store: IdempotencyStore, key: string, value: Buffer, ttlMs: number) => Promise<void>,
): void {
  describe(`store contract: ${name}`, () => {
    let store: IdempotencyStore;
    beforeAll(async () => {
      store = await open();
    });
    afterAll(close);
    const key = () => `idem:contract:${randomUUID()}`;
    const claim = (owner: string, fingerprint = 'fp-1', leaseMs = 5000) => ({ owner, fingerprint, leaseMs });

    it('ping answers without touching a key', async () => {
      await expect(store.ping!()).resolves.toBeUndefined();
    });

    it('peek reads a claim and a record with their expiry and changes nothing; forget deletes either, unfenced', async () => {
      const k = key();
      expect(await store.peek!(k)).toBeUndefined();
      expect(await store.forget!(k)).toBe(false);
      await store.claim(k, claim('a', 'fp-p', 4000));
      const inFlight = await store.peek!(k);
      expect(inFlight).toEqual({ state: 'in-flight', fingerprint: 'fp-p', expiresAt: expect.any(Number) });
      expect(Math.abs(inFlight!.expiresAt - (Date.now() + 4000))).toBeLessThan(1500);
      expect(await store.claim(k, claim('b'))).toEqual({ state: 'in-flight', fingerprint: 'fp-p' });
      expect(await store.commit(k, 'a', sampleRecord('fp-p'), 9000)).toBe(true);
      const done = await store.peek!(k);
      expect(done?.state).toBe('completed');
      expect(Math.abs(done!.expiresAt - (Date.now() + 9000))).toBeLessThan(1500);
      if (done?.state !== 'completed') return;
      expect(done.record.response.status).toBe(402);
      expect(Buffer.compare(done.record.response.body, sampleRecord('x').response.body)).toBe(0);
      expect(await store.forget!(k)).toBe(true);
      expect(await store.peek!(k)).toBeUndefined();
      expect(await store.claim(k, claim('c'))).toEqual({ state: 'claimed' });
      // A claim forgotten under its running handler: that handler can no longer commit or renew.
      expect(await store.forget!(k)).toBe(true);
      expect(await store.commit(k, 'c', sampleRecord('fp-1'), 5000)).toBe(false);
      expect(await store.renew(k, 'c', 5000)).toBe(false);
    });

    // Only where the suite can write a raw value the way the store keeps records.
    if (plant)
      it('a record in a newer format is unreadable: never replayed, never taken over, forgettable', async () => {
        const k = key();
        await plant(store, k, Buffer.from('V9\nfp-future\n{"sealed":true}'), 5000);
        const outcome = await store.claim(k, claim('a'));
        expect(outcome).toEqual({ state: 'unreadable', reason: expect.stringContaining('format 9') });
        expect(await store.claim(k, claim('b'))).toEqual(outcome);
        expect(await store.peek!(k)).toEqual({ ...outcome, expiresAt: expect.any(Number) });
        expect(await store.forget!(k)).toBe(true);
        expect(await store.claim(k, claim('c'))).toEqual({ state: 'claimed' });
      });

    it('claims a free key exactly once; others see it in flight with its fingerprint', async () => {
      const k = key();
      expect(await store.claim(k, claim('a'))).toEqual({ state: 'claimed' });
      expect(await store.claim(k, claim('b', 'fp-2'))).toEqual({ state: 'in-flight', fingerprint: 'fp-1' });
    });

    it('keeps a tagged fingerprint ("<tag>:<hash>") as it is, in flight and completed', async () => {
      const k = key();
      const tagged = 'f1-Ab_9-xYz:47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU';
      await store.claim(k, claim('a', tagged));
      expect(await store.claim(k, claim('b', 'fp-2'))).toEqual({ state: 'in-flight', fingerprint: tagged });
      expect(await store.commit(k, 'a', sampleRecord(tagged), 5000)).toBe(true);
      const outcome = await store.claim(k, claim('b'));
      expect(outcome.state === 'completed' && outcome.record.fingerprint).toBe(tagged);
    });

    it('concurrent claims: exactly one wins', async () => {
      const k = key();
      const outcomes = await Promise.all(Array.from({ length: 50 }, (_, i) => store.claim(k, claim(`o${i}`))));
      expect(outcomes.filter((o) => o.state === 'claimed')).toHaveLength(1);
      expect(outcomes.filter((o) => o.state === 'in-flight')).toHaveLength(49);
    });

    it('commit replaces the claim; a later claim returns the record byte for byte', async () => {
      const k = key();
      await store.claim(k, claim('a', 'fp-r'));
      expect(await store.commit(k, 'a', sampleRecord('fp-r'), 5000)).toBe(true);
      const outcome = await store.claim(k, claim('b'));
      expect(outcome.state).toBe('completed');
      if (outcome.state !== 'completed') return;
      expect(outcome.record.fingerprint).toBe('fp-r');
      expect(outcome.record.response.status).toBe(402);
      expect(outcome.record.response.headers).toEqual(sampleRecord('x').response.headers);
      expect(Buffer.compare(outcome.record.response.body, sampleRecord('x').response.body)).toBe(0);
    });

    it('keeps a 5 MB body, an empty body and many headers byte for byte', async () => {
      const big = Buffer.alloc(5 * 1024 * 1024);
      for (let i = 0; i < big.length; i++) big[i] = (i * 31) & 0xff;
      const headers: Record<string, string | string[]> = {};
      for (let i = 0; i < 200; i++) headers[`x-h${i}`] = i % 2 ? `v${i}` : [`a${i}`, `b${i}`];
      for (const body of [big, Buffer.alloc(0)]) {
        const k = key();
        await store.claim(k, claim('a', 'fp-big'));
        const record = { fingerprint: 'fp-big', response: { status: 201, headers, body } };
        expect(await store.commit(k, 'a', record, 5000)).toBe(true);
        const outcome = await store.claim(k, claim('b'));
        expect(outcome.state).toBe('completed');
        if (outcome.state !== 'completed') return;
        expect(outcome.record.response.headers).toEqual(headers);
        expect(Buffer.compare(outcome.record.response.body, body)).toBe(0);
      }
    });

    it('keys are data: SQL, Lua and JSON look-alikes are stored literally and kept apart', async () => {
      const base = key();
      const keys = [
        `${base}'; DROP TABLE idempotency_records; --`,
        `${base}" OR 1=1 --`,
        `${base}{"$ne":null}`,
        `${base}%`,
        `${base}_`,
      ];
      for (const [i, k] of keys.entries()) {
        expect(await store.claim(k, claim(`o${i}`, `fp-${i}`))).toEqual({ state: 'claimed' });
        expect(await store.commit(k, `o${i}`, sampleRecord(`fp-${i}`), 5000)).toBe(true);
      }
      for (const [i, k] of keys.entries()) {
        const outcome = await store.claim(k, claim('z'));
        expect(outcome.state === 'completed' && outcome.record.fingerprint).toBe(`fp-${i}`);
      }
    });

    it('fencing: commit, release and renew by another owner change nothing', async () => {
      const k = key();
      await store.claim(k, claim('owner'));
      expect(await store.commit(k, 'intruder', sampleRecord('fp-1'), 5000)).toBe(false);
      expect(await store.release(k, 'intruder')).toBe(false);
      expect(await store.renew(k, 'intruder', 5000)).toBe(false);
      expect(await store.claim(k, claim('x'))).toEqual({ state: 'in-flight', fingerprint: 'fp-1' });
      // An owner whose token is a prefix of the real one is still someone else.
      expect(await store.release(k, 'own')).toBe(false);
      expect(await store.commit(k, 'owner', sampleRecord('fp-1'), 5000)).toBe(true);
      expect(await store.release(k, 'owner')).toBe(false); // a record is no claim
      expect(await store.commit(k, 'owner', sampleRecord('fp-1'), 5000)).toBe(false);
      expect((await store.claim(k, claim('y'))).state).toBe('completed');
    });

    it('release frees the key for a retry', async () => {
      const k = key();
      await store.claim(k, claim('a'));
      expect(await store.release(k, 'a')).toBe(true);
      expect(await store.claim(k, claim('b'))).toEqual({ state: 'claimed' });
    });

    it('an unrenewed lease expires; the late owner can no longer commit', async () => {
      const k = key();
      await store.claim(k, claim('slow', 'fp-1', 100));
      await sleep(160);
      expect(await store.claim(k, claim('next', 'fp-1', 5000))).toEqual({ state: 'claimed' });
      expect(await store.commit(k, 'slow', sampleRecord('stale'), 5000)).toBe(false);
      expect(await store.commit(k, 'next', sampleRecord('fresh'), 5000)).toBe(true);
      const outcome = await store.claim(k, claim('z'));
      expect(outcome.state === 'completed' && outcome.record.fingerprint).toBe('fresh');
    });

    it('renewal keeps a claim past its first lease', async () => {
      const k = key();
      // A second of margin for a loaded CI machine: each renewal comes at a third of the lease.
      await store.claim(k, claim('a', 'fp-1', 1_500));
      for (let i = 0; i < 3; i++) {
        await sleep(500);
        expect(await store.renew(k, 'a', 1_500)).toBe(true);
      }
      expect((await store.claim(k, claim('b'))).state).toBe('in-flight');
    });

    it("renewAll renews each of the caller's claims in one call and refuses the rest, answering in order", async () => {
      const [a, b, c, d] = [key(), key(), key(), key()];
      await store.claim(a, claim('a', 'fp-1', 1000));
      await store.claim(b, claim('b', 'fp-1', 1000));
      await store.claim(c, claim('c'));
      await store.commit(c, 'c', sampleRecord('fp-1'), 5000);
      const before = (await store.peek!(a))!.expiresAt;
      const owned = [
        { key: a, owner: 'a' },
        { key: b, owner: 'intruder' },
        { key: c, owner: 'c' },
        { key: d, owner: 'd' },
        { key: b, owner: 'b' },
      ];
      expect(await store.renewAll!(owned, 60_000)).toEqual([true, false, false, false, true]);
      expect((await store.peek!(a))!.expiresAt).toBeGreaterThan(before + 30_000);
      expect((await store.peek!(c))!.state).toBe('completed');
      expect(await store.peek!(d)).toBeUndefined();
      expect(await store.renewAll!([], 1000)).toEqual([]);
    });

    it('a record expires after its ttl', async () => {
      const k = key();
      await store.claim(k, claim('a'));
      await store.commit(k, 'a', sampleRecord('fp-1'), 500);
      expect((await store.claim(k, claim('b'))).state).toBe('completed');
      await sleep(560);
      expect(await store.claim(k, claim('c'))).toEqual({ state: 'claimed' });
    });
  });
}
