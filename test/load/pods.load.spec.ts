import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Answer, pay, Pod, pooled } from '../support/pod.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { RedisServer, redisAvailable } from '../support/redis-server.js';
import { built } from '../support/build.js';

built('.build');

/** Issue 10's size, on the store it names: 20,000 requests over 2,000 keys, two processes on one PostgreSQL. */
const FULL = { requests: 20_000, keys: 2_000 };
/** The other stores share the protocol and pass the contract suite: a tenth of that keeps the suite short. */
const SMALL = { requests: 2_000, keys: 200 };
const CONCURRENCY = 48;
/** A payment provider that takes a moment, so that duplicates in a burst really overlap. */
const PROVIDER_LATENCY_MS = 2;

/** A small deterministic PRNG (mulberry32), so every run sends the same traffic. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Tally {
  handled: number;
  replayed: number;
  conflicts: number;
  /** Any other answer, as `status body`: the failure says what it was. */
  other: string[];
}

/**
 * `requests` over `keys`: random retries, and bursts of 2-4 concurrent duplicates.
 * Checks: one payment row per key, every replay identical to the first response, no 5xx.
 */
async function runLoad(
  pods: Pod[],
  database: string,
  label: string,
  { requests, keys }: { requests: number; keys: number },
): Promise<void> {
  const random = prng(42);
  const body = (k: number) => ({ amount: 100 + k, currency: 'EUR' });
  const tasks: (() => Promise<[number, Answer][]>)[] = [];
  // A store too busy to answer in time sheds the request with 503 and Retry-After, before any handler
  // runs (SQLite's lock wait on two cores shared with another job): the client sends it again, as
  // clients do, until a deadline. Counted and printed; any other answer fails the test.
  const until = Date.now() + 240_000;
  let shed = 0;
  const send = async (base: string, k: number): Promise<Answer> => {
    let answer = await pay(base, `load-${label}-${k}`, body(k));
    while (answer.status === 503 && answer.text.includes('store unavailable') && Date.now() < until) {
      shed++;
      await new Promise((r) => setTimeout(r, 100));
      answer = await pay(base, `load-${label}-${k}`, body(k));
    }
    return answer;
  };
  let planned = 0;
  while (planned < requests) {
    const k = Math.floor(random() * keys);
    const burst = Math.min(random() < 0.2 ? 2 + Math.floor(random() * 3) : 1, requests - planned);
    const group = Array.from({ length: burst }, () => pods[Math.floor(random() * pods.length)]);
    planned += burst;
    // A burst goes out as one task, its requests at once: concurrent duplicates.
    tasks.push(async () => (await Promise.all(group.map((p) => send(p.base, k)))).map((a) => [k, a]));
  }
  const flat = (await pooled(CONCURRENCY, tasks)).flat();
  // Keys that only ever saw 409 get one final retry, as a client would.
  const first = new Map<number, string>();
  const tally: Tally = { handled: 0, replayed: 0, conflicts: 0, other: [] };
  const check = (k: number, a: Answer) => {
    if (a.status === 409) tally.conflicts++;
    else if (a.status === 201) {
      if (a.replayed) tally.replayed++;
      else tally.handled++;
      const seen = first.get(k);
      if (seen === undefined) first.set(k, a.text);
      else expect(a.text).toBe(seen);
    } else tally.other.push(`${a.status} ${a.text.slice(0, 300)}`);
  };
  for (const [k, a] of flat) check(k, a);
  for (let k = 0; k < keys; k++) {
    if (first.has(k)) continue;
    check(k, await send(pods[0].base, k));
  }
  const db = new Database(database, { readonly: true });
  const rows = db.prepare('SELECT idempotency_key AS key, COUNT(*) AS n FROM payments GROUP BY idempotency_key').all() as {
    key: string;
    n: number;
  }[];
  db.close();
  process.stdout.write(
    `\nload (${label}): ${flat.length} requests over ${keys} keys -> handled ${tally.handled}, replayed ${tally.replayed}, 409 ${tally.conflicts}, shed (503) ${shed}, other ${tally.other.length}; rows ${rows.length} (max per key ${Math.max(...rows.map((r) => r.n))})\n`,
  );
  expect(tally.other).toEqual([]);
  expect(tally.handled).toBe(keys);
  expect(rows).toHaveLength(keys);
  expect(rows.every((r) => r.n === 1)).toBe(true);
}

describe('load on the sample payments API', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'idem-load-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('in-memory store, one process', async () => {
    const database = join(dir, 'memory.db');
    const pod = await Pod.start({ database, providerLatencyMs: PROVIDER_LATENCY_MS });
    try {
      await runLoad([pod], database, 'memory', SMALL);
    } finally {
      await pod.kill();
    }
  }, 120_000);

  it('SQLite store, two processes on one file (records beside the payments)', async () => {
    const database = join(dir, 'sqlite.db');
    const pods = [
      await Pod.start({ database, store: 'sqlite', providerLatencyMs: PROVIDER_LATENCY_MS }),
      await Pod.start({ database, store: 'sqlite', providerLatencyMs: PROVIDER_LATENCY_MS, adapter: 'fastify' }),
    ];
    try {
      await runLoad(pods, database, 'sqlite', SMALL);
    } finally {
      await Promise.all(pods.map((p) => p.kill()));
    }
  }, 120_000);

  (postgresAvailable('load suite (PostgreSQL)') ? it : it.skip)(
    'PostgreSQL store, two processes',
    async () => {
      const server = await PostgresServer.start();
      const postgresUrl = await server.createDatabase(`load_${process.pid}`);
      const database = join(dir, 'postgres.db');
      const pods = [
        await Pod.start({ database, store: 'postgres', postgresUrl, providerLatencyMs: PROVIDER_LATENCY_MS }),
        await Pod.start({ database, store: 'postgres', postgresUrl, providerLatencyMs: PROVIDER_LATENCY_MS, adapter: 'fastify' }),
      ];
      try {
        await runLoad(pods, database, 'postgres', FULL);
      } finally {
        await Promise.all(pods.map((p) => p.kill()));
        await server.destroy();
      }
    },
    300_000,
  );

  (redisAvailable('load suite (Redis)') ? it : it.skip)(
    'Redis store, two processes',
    async () => {
      const server = await RedisServer.start();
      const database = join(dir, 'redis.db');
      const pods = [
        await Pod.start({ database, redisUrl: server.url, providerLatencyMs: PROVIDER_LATENCY_MS }),
        await Pod.start({ database, redisUrl: server.url, providerLatencyMs: PROVIDER_LATENCY_MS, adapter: 'fastify' }),
      ];
      try {
        await runLoad(pods, database, 'redis', SMALL);
      } finally {
        await Promise.all(pods.map((p) => p.kill()));
        await server.stop();
      }
    },
    120_000,
  );
});
