import { createHash, randomUUID } from 'node:crypto';
import type { IdempotencyRecord } from '../lib/stores/index.js';
import { InMemoryStore } from '../lib/index.js';
import { requestFingerprint } from '../lib/shared/utils/fingerprint.util.js';
import { storeKey, UNSCOPED } from '../lib/shared/utils/key.util.js';

/** Median of a few timed repetitions of `fn`, in ns per call. */
function timeIt(fn: () => void, calls: number, reps = 7): number {
  const samples: number[] = [];
  for (let r = 0; r < reps; r++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < calls; i++) fn();
    samples.push(Number(process.hrtime.bigint() - start) / calls);
  }
  return median(samples);
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** A record as the interceptor stores it for a 100-byte JSON body on Express. */
function record(i: number): IdempotencyRecord {
  const body = Buffer.from(
    `{"txId":"tx-${String(i).padStart(12, '0')}","status":"succeeded","amount":1000,"currency":"EUR","pad":"${'x'.repeat(20)}"}`,
  );
  return {
    fingerprint: createHash('sha256').update(String(i)).digest('base64url'),
    response: {
      status: 201,
      headers: {
        'x-powered-by': ['Ex', 'press'].join(''),
        'content-type': ['application/json', 'charset=utf-8'].join('; '),
        etag: `W/"${body.length.toString(16)}-${createHash('sha1').update(body).digest('base64').slice(0, 27)}"`,
      },
      body,
    },
  };
}

const RECORDS = 200_000;
/** As many requests as the load generator keeps in flight (bench/run.ts). */
export const CONNECTIONS = 50;

async function fill(cache: InMemoryStore, n: number): Promise<string[]> {
  const keys: string[] = [];
  for (let i = 0; i < n; i++) {
    // Built as the interceptor builds it, from a key as Node's HTTP parser hands it over.
    const key = storeKey('idem:', UNSCOPED, Buffer.from(randomUUID()).toString('latin1'));
    const owner = randomUUID();
    await cache.claim(key, { owner, fingerprint: 'f', leaseMs: 60_000 });
    await cache.commit(key, owner, record(i), 86_400_000);
    keys.push(key);
  }
  return keys;
}

function gc(): void {
  const g = (globalThis as { gc?: () => void }).gc;
  if (!g) throw new Error('run with node --expose-gc');
  for (let i = 0; i < 3; i++) g();
}

export async function heapPerRecord(): Promise<number> {
  gc();
  const empty = new InMemoryStore({ maxEntries: RECORDS });
  const before = process.memoryUsage();
  const base = before.heapUsed + before.arrayBuffers;
  const keys = await fill(empty, RECORDS);
  gc();
  const after = process.memoryUsage();
  const used = after.heapUsed + after.arrayBuffers;
  const perRecord = (used - base - keysBytes(keys)) / RECORDS;
  void empty.size;
  return perRecord;
}

// The benchmark's own array of keys is not the store's memory: subtract its slots (the strings are
// the store's keys, shared).
function keysBytes(keys: string[]): number {
  return keys.length * 8;
}

export async function storeOpsPerSecond(): Promise<{ claimCommit: number; read: number }> {
  const cache = new InMemoryStore({ maxEntries: RECORDS * 2 });
  const keys = await fill(cache, RECORDS);
  const rec = record(1);
  let i = 0;
  const fresh = Array.from({ length: 50_000 }, () => `idem:%:${randomUUID()}`);
  // In bursts of CONNECTIONS, as the requests of one turn reach the store under the HTTP load: the
  // store answers a turn's claims together (one after another, each claim would wait a turn).
  const t0 = process.hrtime.bigint();
  for (let at = 0; at < fresh.length; at += CONNECTIONS) {
    const burst = fresh.slice(at, at + CONNECTIONS);
    await Promise.all(
      burst.map(async (key) => {
        await cache.claim(key, { owner: 'o', fingerprint: 'f', leaseMs: 60_000 });
        await cache.commit(key, 'o', rec, 86_400_000);
      }),
    );
  }
  const claimCommit = fresh.length / (Number(process.hrtime.bigint() - t0) / 1e9);
  const t1 = process.hrtime.bigint();
  for (; i < 100_000; i += CONNECTIONS) {
    const burst = Array.from({ length: CONNECTIONS }, (_, j) => keys[((i + j) * 7919) % keys.length]);
    await Promise.all(burst.map((key) => cache.claim(key, { owner: 'x', fingerprint: 'f', leaseMs: 1 })));
  }
  const read = 100_000 / (Number(process.hrtime.bigint() - t1) / 1e9);
  return { claimCommit, read };
}

/** A JSON body of about `bytes` bytes: an array of small objects with unsorted keys. */
function jsonBody(bytes: number): unknown {
  const items: unknown[] = [];
  let size = 2;
  for (let i = 0; size < bytes; i++) {
    const item = { zeta: i, alpha: `value-${i}`, mid: { y: true, b: null, list: [i, i + 1] } };
    size += JSON.stringify(item).length + 1;
    items.push(item);
  }
  return { items, total: items.length };
}

export interface FingerprintCost {
  size: string;
  /** The default: the parsed body in canonical JSON. */
  canonicalUs: number;
  /** `fingerprint: 'raw'`: the bytes as received. */
  rawUs: number;
  sha256Us: number;
  canonicalRatio: number;
  rawRatio: number;
}

export function fingerprintCost(): FingerprintCost[] {
  return [1024, 64 * 1024, 1024 * 1024].map((bytes) => {
    const body = jsonBody(bytes);
    const raw = Buffer.from(JSON.stringify(body));
    const calls = bytes >= 1024 * 1024 ? 20 : bytes >= 65536 ? 300 : 5000;
    const url = '/api/payments?b=2&a=1';
    const canonical = timeIt(() => requestFingerprint('POST', url, body, 'PaymentsController.create'), calls);
    const rawBody = timeIt(() => requestFingerprint('POST', url, raw, 'PaymentsController.create'), calls);
    const sha = timeIt(() => createHash('sha256').update(raw).digest('base64url'), calls);
    return {
      size: bytes >= 1048576 ? '1 MiB' : bytes >= 65536 ? '64 KiB' : '1 KiB',
      canonicalUs: canonical / 1000,
      rawUs: rawBody / 1000,
      sha256Us: sha / 1000,
      canonicalRatio: canonical / sha,
      rawRatio: rawBody / sha,
    };
  });
}
