import autocannon from 'autocannon';
import { type ChildProcess, execFileSync, fork, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { requestFingerprint } from '../lib/shared/utils/fingerprint.util.js';
import { MySqlServer } from '../test/support/mysql-server.js';
import { PostgresServer } from '../test/support/postgres-server.js';
import { CONNECTIONS, fingerprintCost, heapPerRecord, median, storeOpsPerSecond } from './micro.js';

/**
 * `npm run bench`: every figure is measured in this one run, variants side by side and interleaved.
 * Servers run on 127.0.0.1 in processes of their own; autocannon drives them from this process.
 */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const DURATION_S = Number(process.env.BENCH_DURATION ?? 8);
// `noop` is the floor under any interceptor: Nest's interceptor pipeline with one that does nothing.
// `fastify-*` run the same module on the Fastify adapter; their ratios are to `fastify-noop`.
// `memory` has @opentelemetry/api installed and no SDK registered (what most apps have); `memory-quiet`
// turns OpenTelemetry off (nothing observes: the path before issue 14); `memory-events` has only an
// events listener that does nothing; `memory-sealed` is `memory-quiet` with `encryption` (AES-256-GCM);
// `memory-wait` is `memory-quiet` with `inFlight: 'wait'` and `redis-wait` is `redis` with it: what a
// route that lets duplicates wait pays when none does (its settles are announced).
const ALL_VARIANTS = [
  'bare',
  'noop',
  'undecorated',
  'memory',
  'memory-quiet',
  'memory-events',
  'memory-sealed',
  'memory-wait',
  'sqlite',
  'redis',
  'redis-wait',
  'postgres',
  'postgres-tx',
  'mysql',
  'fastify-bare',
  'fastify-noop',
  'fastify-undecorated',
  'fastify-memory',
  'fastify-redis',
  'fastify-sqlite',
  'fastify-postgres',
  'fastify-mysql',
] as const;
type Variant = (typeof ALL_VARIANTS)[number];
// BENCH_VARIANTS=noop,memory narrows a run while working on one cell; the floors always run.
const VARIANTS: readonly Variant[] = (() => {
  const wanted = process.env.BENCH_VARIANTS?.split(',').map((v) => v.trim());
  if (!wanted) return ALL_VARIANTS;
  const floors = wanted.some((v) => v.startsWith('fastify-'))
    ? ['bare', 'noop', 'fastify-bare', 'fastify-noop']
    : ['bare', 'noop'];
  return ALL_VARIANTS.filter((v) => floors.includes(v) || wanted.includes(v));
})();
const has = (v: Variant) => VARIANTS.includes(v);
/** The floor a variant is compared with: the do-nothing interceptor on the same adapter. */
const floorOf = (v: Variant): Variant => (v.startsWith('fastify-') ? 'fastify-noop' : 'noop');
const bareOf = (v: Variant): Variant => (v.startsWith('fastify-') ? 'fastify-bare' : 'bare');
const isPlain = (v: Variant) => v.endsWith('bare') || v.endsWith('noop') || v.endsWith('undecorated');
// `conflict`: every request is a duplicate of one still in flight (POST /hold never answers): a 409.
const WORKLOADS = ['first', 'replay', 'conflict'] as const;
type Workload = (typeof WORKLOADS)[number];
/** Which variant runs which workload: conflicts on each store with default options, on both adapters. */
const runs = (v: Variant, w: Workload) =>
  w !== 'conflict' || !(isPlain(v) || v === 'postgres-tx' || /^memory-/.test(v) || v.endsWith('-wait'));

const children: ChildProcess[] = [];
function stopAll(): void {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}
process.on('exit', stopAll);
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => process.exit(130));

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const a = srv.address();
      srv.close(() => (a && typeof a === 'object' ? resolve(a.port) : reject(new Error('no port'))));
    });
  });
}

const redisCli = (port: number, ...args: string[]) =>
  execFileSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' });

/** CPU time (user + system, µs) of a process and its children (PostgreSQL's backends), from /proc. */
function treeCpuMicros(root: number | undefined): number {
  if (root === undefined) return 0;
  const tick = 1e6 / 100; // USER_HZ
  let total = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    // Fields after the command (which may hold spaces): state ppid … utime(14) stime(15).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(entry) === root || Number(fields[1]) === root) total += (Number(fields[11]) + Number(fields[12])) * tick;
  }
  return total;
}

let redisPid: number | undefined;
let postgresPid: number | undefined;
let mysqlPid: number | undefined;
/** The database server a variant's store talks to, whose CPU time the run reads. */
const storeServerOf = (v: Variant) =>
  v.includes('redis') ? redisPid : v.includes('postgres') ? postgresPid : v.includes('mysql') ? mysqlPid : undefined;

async function startRedis(): Promise<number> {
  const port = await freePort();
  const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  redisPid = redis.pid;
  children.push(redis);
  for (let i = 0; i < 100; i++) {
    try {
      if (redisCli(port, 'PING').trim() === 'PONG') return port;
    } catch {
      // starting
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('redis-server did not start');
}

async function startServer(variant: Variant, redisPort: number, pgUrl: string, mysqlUrl: string, dir: string): Promise<string> {
  const port = await freePort();
  const child = fork(new URL('./server.js', import.meta.url), [], {
    env: {
      ...process.env,
      NODE_ENV: 'bench',
      VARIANT: variant,
      PORT: String(port),
      REDIS_URL: `redis://127.0.0.1:${redisPort}`,
      PG_URL: pgUrl,
      MYSQL_URL: mysqlUrl,
      // A file per variant: two processes on one file made each wait for the other's write lock and checkpoints.
      SQLITE_FILE: join(dir, `${variant}.db`),
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`${variant} server exited with ${code}`)));
  });
  return `http://127.0.0.1:${port}`;
}

async function stats(base: string): Promise<{ runs: number; cpuMicros: number; queries: number }> {
  return (await fetch(`${base}/stats`)).json() as Promise<{ runs: number; cpuMicros: number; queries: number }>;
}

const BODY = '{"amount":1000,"currency":"EUR"}';
const HOLD_KEY = `hold-${randomUUID()}`;
// Requests to /hold that never answer; aborted when the run ends.
const holding = new AbortController();

/** Sends the key the `conflict` workload repeats, and waits until a duplicate of it is refused. */
async function hold(base: string): Promise<void> {
  const post = (signal: AbortSignal) => fetch(`${base}/hold`, { method: 'POST', headers: headers(HOLD_KEY), body: BODY, signal });
  post(holding.signal).catch(() => undefined);
  for (let i = 0; i < 200; i++) {
    // A probe that got there first holds the key itself and never answers: give up on it, and the
    // next probe finds the key held either way.
    const r = await post(AbortSignal.any([holding.signal, AbortSignal.timeout(1000)])).catch(() => undefined);
    await r?.arrayBuffer();
    if (r?.status === 409) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`${base}/hold: no 409 for a duplicate in flight`);
}
const headers = (key?: string) => ({ 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) });

function load(base: string, workload: Workload, replayKey: string, opts: { duration?: number; amount?: number }) {
  let n = 0;
  const prefix = randomUUID();
  return autocannon({
    url: workload === 'conflict' ? `${base}/hold` : `${base}/tx`,
    connections: CONNECTIONS,
    ...opts,
    requests: [
      {
        method: 'POST',
        body: BODY,
        setupRequest: (req) => ({
          ...req,
          headers: headers(workload === 'first' ? `${prefix}-${++n}` : workload === 'conflict' ? HOLD_KEY : replayKey),
        }),
      },
    ],
  });
}

interface Cell {
  variant: Variant;
  workload: Workload;
  round: number;
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  cpuPerResponseUs: number;
  /** CPU of the database server (PostgreSQL's processes, redis-server) per response; 0 for the others. */
  storeCpuPerResponseUs: number;
}

async function main(): Promise<void> {
  const started = Date.now();
  const redisPort = await startRedis();
  const postgres = await PostgresServer.start({ ownServer: true });
  const usesMySql = VARIANTS.some((v) => v.includes('mysql'));
  const mysql = usesMySql ? await MySqlServer.start({ ownServer: true }) : undefined;
  const mysqlUrl = mysql ? await mysql.createDatabase('bench') : '';
  const dir = mkdtempSync(join(tmpdir(), 'idem-bench-'));
  const bases = {} as Record<Variant, string>;
  for (const v of VARIANTS) bases[v] = await startServer(v, redisPort, postgres.url, mysqlUrl, dir);
  const replayKey = `replay-${randomUUID()}`;
  for (const v of VARIANTS) {
    // Prime the replay key, and warm up each server (JIT, connections, script cache).
    await fetch(`${bases[v]}/tx`, { method: 'POST', headers: headers(replayKey), body: BODY });
    await load(bases[v], 'first', replayKey, { duration: 2 });
    if (runs(v, 'conflict')) await hold(bases[v]);
  }

  // Correctness in the same run: handler runs == 2xx for a fixed count; none during replays.
  const correctness: Record<string, string> = {};
  for (const v of VARIANTS) {
    const before = await stats(bases[v]);
    const first = await load(bases[v], 'first', replayKey, { amount: 5000 });
    const mid = await stats(bases[v]);
    const replay = await load(bases[v], 'replay', replayKey, { amount: 5000 });
    const after = await stats(bases[v]);
    const firstOk = mid.runs - before.runs === first['2xx'] && first.non2xx === 0;
    const replayOk = isPlain(v) ? true : after.runs === mid.runs && replay.non2xx === 0;
    let conflict = 'n/a';
    if (runs(v, 'conflict')) {
      const refused = await load(bases[v], 'conflict', replayKey, { amount: 2000 });
      const end = await stats(bases[v]);
      const ok = end.runs === after.runs && refused['2xx'] === 0 && refused.non2xx === 2000;
      conflict = `${end.runs - after.runs} runs, ${refused.non2xx} of 2000 refused ${ok ? 'OK' : 'WRONG'}`;
    }
    correctness[v] =
      `first: ${mid.runs - before.runs} runs for ${first['2xx']} 2xx ${firstOk ? 'OK' : 'WRONG'}; replay: ${isPlain(v) ? 'n/a (no idempotency)' : `${after.runs - mid.runs} runs ${replayOk ? 'OK' : 'WRONG'}`}; conflict: ${conflict}`;
  }

  postgresPid = postgres.pid;
  mysqlPid = mysql?.pid;
  const cells: Cell[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    for (const workload of WORKLOADS) {
      // Rotate the variant order every round, so no variant always runs first (or last).
      const order = VARIANTS.map((_, i) => VARIANTS[(i + round) % VARIANTS.length]);
      for (const variant of order.filter((v) => runs(v, workload))) {
        const server = storeServerOf(variant);
        const before = await stats(bases[variant]);
        const storeBefore = treeCpuMicros(server);
        const r = await load(bases[variant], workload, replayKey, { duration: DURATION_S });
        const storeAfter = treeCpuMicros(server);
        const after = await stats(bases[variant]);
        cells.push({
          variant,
          workload,
          round,
          rps: r.requests.average,
          p50: r.latency.p50,
          p99: r.latency.p99,
          non2xx: r.non2xx,
          cpuPerResponseUs: (after.cpuMicros - before.cpuMicros - 0) / Math.max(1, r.requests.total),
          storeCpuPerResponseUs: (storeAfter - storeBefore) / Math.max(1, r.requests.total),
        });
        process.stderr.write(`round ${round + 1}/${ROUNDS} ${workload} ${variant}: ${Math.round(r.requests.average)} req/s\n`);
      }
    }
  }

  // Redis commands per request kind, counted by the server (CONFIG RESETSTAT, then fixed counts).
  const budget = has('redis') ? await redisBudget(bases.redis, redisPort) : undefined;
  const pgTrips = has('postgres') ? await roundTrips(bases.postgres, plantInPostgres(postgres)) : undefined;
  const myTrips = has('mysql') && mysql ? await roundTrips(bases.mysql, plantInMySql(mysql, mysqlUrl)) : undefined;
  const txTrips = has('postgres-tx')
    ? await roundTrips(bases['postgres-tx'], plantInPostgres(postgres, 'idempotency_tx'), 'TransactionalController.create')
    : undefined;
  // The fingerprint first: after the store micro-benchmarks its figures carried their garbage.
  const fingerprint = fingerprintCost();
  const micro = { heapPerRecord: await heapPerRecord(), ops: await storeOpsPerSecond(), fingerprint };
  holding.abort();
  stopAll();
  await postgres.destroy();
  await mysql?.destroy();
  rmSync(dir, { recursive: true, force: true });
  if (pgTrips) {
    process.stdout.write(
      `PostgresStore round trips per request (counted by the server's pool; target 2 / 1 / 1): first ${pgTrips.first}, replay ${pgTrips.replay}, conflict ${pgTrips.conflict}\n`,
    );
  }
  if (myTrips) {
    process.stdout.write(
      `MySqlStore round trips per request (counted by the store's pool; target 2 / 1 / 1): first ${myTrips.first}, replay ${myTrips.replay}, conflict ${myTrips.conflict}\n`,
    );
  }
  if (txTrips) {
    process.stdout.write(
      `transactional route (claim on the pool; BEGIN, completion, COMMIT on the transaction's client): first ${txTrips.first}, replay ${txTrips.replay}, conflict ${txTrips.conflict}\n`,
    );
  }

  const table = report(cells, budget, micro, correctness);
  process.stdout.write(`${table}\n`);
  // Raw figures go next to the sources (bench/results/, git-ignored), not into the compiled .build/.
  mkdirSync('bench/results', { recursive: true });
  const file = `bench/results/bench-${new Date().toISOString().replace(/[:.]/g, '-')}.json`;
  writeFileSync(
    file,
    JSON.stringify(
      {
        machine: machine(),
        seconds: (Date.now() - started) / 1000,
        cells,
        budget,
        pgTrips,
        myTrips,
        txTrips,
        micro,
        correctness,
      },
      null,
      2,
    ),
  );
  process.stdout.write(`raw results: ${file}\n`);
}

async function redisBudget(
  base: string,
  redisPort: number,
): Promise<Record<'first' | 'replay' | 'conflict', Record<string, number>>> {
  const N = 200;
  const count = async (fn: () => Promise<void>) => {
    redisCli(redisPort, 'CONFIG', 'RESETSTAT');
    await fn();
    const out: Record<string, number> = {};
    for (const line of redisCli(redisPort, 'INFO', 'commandstats').split('\n')) {
      const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
      if (m && !m[1].startsWith('config') && m[1] !== 'info') out[m[1]] = Number(m[2]) / N;
    }
    // The conflict workload's /hold request never ends, and its lease is renewed meanwhile: one
    // EVALSHA and one PEXPIRE each, not this count's requests.
    if (out.pexpire) {
      out.evalsha -= out.pexpire;
      delete out.pexpire;
    }
    return out;
  };
  const post = (key: string) =>
    fetch(`${base}/tx`, { method: 'POST', headers: headers(key), body: BODY }).then((r) => r.arrayBuffer());
  const keys = Array.from({ length: N }, () => `budget-${randomUUID()}`);
  const first = await count(async () => {
    for (const k of keys) await post(k);
  });
  const replay = await count(async () => {
    for (const k of keys) await post(k);
  });
  // A conflict: the key is held in flight by "another pod" (a claim written straight into Redis).
  const held = `held-${randomUUID()}`;
  const fingerprint = requestFingerprint('POST', '/tx', JSON.parse(BODY), 'IdempotentController.create');
  redisCli(redisPort, 'SET', `idem:%:${held}`, `C${randomUUID()}\n${fingerprint}`, 'PX', '60000');
  const conflict = await count(async () => {
    for (let i = 0; i < N; i++) {
      const r = await fetch(`${base}/tx`, { method: 'POST', headers: headers(held), body: BODY });
      if (r.status !== 409) throw new Error(`expected 409, got ${r.status}`);
      await r.arrayBuffer();
    }
  });
  return { first, replay, conflict };
}

/** Plants a claim of "another pod" on a store key, with the fingerprint of the bench's request. */
type PlantHeld = (storeKey: string, fingerprint: string) => Promise<unknown>;

/**
 * Statements a SQL store's pool ran per request kind (each is one round trip): `plant` writes the
 * claim the conflicts meet straight into the table, as another pod's would be.
 */
async function roundTrips(
  base: string,
  plant: PlantHeld,
  route = 'IdempotentController.create',
): Promise<Record<'first' | 'replay' | 'conflict', number>> {
  const N = 200;
  const per = async (fn: () => Promise<void>) => {
    const before = (await stats(base)).queries;
    await fn();
    return ((await stats(base)).queries - before) / N;
  };
  const post = (key: string) => fetch(`${base}/tx`, { method: 'POST', headers: headers(key), body: BODY }).then((r) => r.status);
  const keys = Array.from({ length: N }, () => `trips-${randomUUID()}`);
  const first = await per(async () => {
    for (const k of keys) await post(k);
  });
  const replay = await per(async () => {
    for (const k of keys) await post(k);
  });
  const held = `held-${randomUUID()}`;
  await plant(`idem:%:${held}`, requestFingerprint('POST', '/tx', JSON.parse(BODY), route));
  const conflict = await per(async () => {
    for (let i = 0; i < N; i++) if ((await post(held)) !== 409) throw new Error('expected 409');
  });
  return { first, replay, conflict };
}

/** A claim row in PostgreSQL, in flight for a minute. */
const plantInPostgres =
  (server: PostgresServer, table = 'idempotency_records'): PlantHeld =>
  (key, fingerprint) =>
    server.query(
      `INSERT INTO ${table} (key, fingerprint, state, owner, expires_at)
       VALUES ($1, $2, 0, 'another pod', clock_timestamp() + interval '1 minute')`,
      [key, fingerprint],
    );

/** A claim row in MySQL, in flight for a minute. */
const plantInMySql =
  (server: MySqlServer, url: string): PlantHeld =>
  (key, fingerprint) =>
    server.query(
      `INSERT INTO idempotency_records (\`key\`, fingerprint, state, owner, expires_at)
       VALUES (?, ?, 0, 'another pod', UTC_TIMESTAMP(3) + INTERVAL 1 MINUTE)`,
      [key, fingerprint],
      url,
    );

function machine(): string {
  return `${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}, ${process.platform}`;
}

type Micro = {
  heapPerRecord: number;
  ops: { claimCommit: number; read: number };
  fingerprint: ReturnType<typeof fingerprintCost>;
};

function report(
  cells: Cell[],
  budget: Awaited<ReturnType<typeof redisBudget>> | undefined,
  micro: Micro,
  correctness: Record<string, string>,
): string {
  const of = (v: Variant, w: Workload) => cells.filter((c) => c.variant === v && c.workload === w);
  const med = (v: Variant, w: Workload, f: 'rps' | 'p50' | 'p99' | 'cpuPerResponseUs' | 'storeCpuPerResponseUs') =>
    median(of(v, w).map((c) => c[f]));
  // Per-round ratio against `base` of the same round, then the median of those ratios: the machine
  // drifts between rounds, not within one round's neighbouring cells.
  // A conflict (a 409) is compared with what the floor does for a request: its `first`.
  const baseW = (w: Workload): Workload => (w === 'conflict' ? 'first' : w);
  const sameRound = (base: Variant, w: Workload, round: number) =>
    cells.find((b) => b.variant === base && b.workload === baseW(w) && b.round === round)!;
  const perRound = (v: Variant, w: Workload, f: 'rps' | 'cpuPerResponseUs', base: Variant) =>
    of(v, w).map((c) => c[f] / sameRound(base, w, c.round)[f]);
  const ratio = (v: Variant, w: Workload, f: 'rps' | 'cpuPerResponseUs', base = floorOf(v)) =>
    has(v) && runs(v, w) ? median(perRound(v, w, f, base)) : NaN;
  /** Server CPU per response above `base`'s in the same round, in µs (median over rounds). */
  const cpuOver = (v: Variant, w: Workload, base: Variant) =>
    has(v) ? median(of(v, w).map((c) => c.cpuPerResponseUs - sameRound(base, w, c.round).cpuPerResponseUs)) : NaN;
  const lines: string[] = [];
  lines.push(`Machine: ${machine()}; ${ROUNDS} rounds x ${DURATION_S} s per cell, ${CONNECTIONS} connections, medians.`, '');
  lines.push(
    '| variant | workload | req/s | p50 ms | p99 ms | non-2xx | server CPU µs/response | CPU over noop µs | database CPU µs/response | req/s vs noop (per round) | req/s vs bare | CPU vs bare |',
  );
  lines.push('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const w of WORKLOADS) {
    for (const v of VARIANTS.filter((x) => runs(x, w))) {
      const floor = floorOf(v);
      const plain = v === floor || v === bareOf(v);
      const rounds = perRound(v, w, 'rps', floor).map((r) => r.toFixed(2));
      const vsFloor = plain ? '—' : `${ratio(v, w, 'rps').toFixed(2)} (${rounds.join(', ')})`;
      const over = plain ? '—' : cpuOver(v, w, floor).toFixed(1);
      lines.push(
        `| ${v} | ${w} | ${Math.round(med(v, w, 'rps'))} | ${med(v, w, 'p50')} | ${med(v, w, 'p99')} | ${of(v, w).reduce((n, c) => n + c.non2xx, 0)} | ${med(v, w, 'cpuPerResponseUs').toFixed(1)} | ${over} | ${storeServerOf(v) === undefined ? '—' : med(v, w, 'storeCpuPerResponseUs').toFixed(1)} | ${vsFloor} | ${ratio(v, w, 'rps', bareOf(v)).toFixed(2)} | ${ratio(v, w, 'cpuPerResponseUs', bareOf(v)).toFixed(2)} |`,
      );
    }
  }
  const cmds = (b: Record<string, number>) =>
    Object.entries(b)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ') || 'none';
  const evalsha = (b: Record<string, number>) => b.evalsha ?? 0;
  const fp1m = micro.fingerprint.find((f) => f.size === '1 MiB')!;
  const at = (goal: string, got: number, ok: (x: number) => boolean, digits = 2): [string, string, boolean | null] => [
    goal,
    Number.isNaN(got) ? 'not run' : got.toFixed(digits),
    Number.isNaN(got) ? null : ok(got),
  ];
  const atMost = (limit: number, got: number) => at(`<= ${limit.toFixed(2)}`, got, (x) => x <= limit);
  const atLeast = (limit: number, got: number) => at(`>= ${limit.toFixed(2)}`, got, (x) => x >= limit);
  // The goals of issue 27: CPU above the do-nothing interceptor (µs), or req/s as a share of bare.
  const cpuGoals: [string, Variant, Workload, Variant, number][] = [
    ['Express memory `first`', 'memory', 'first', 'noop', 25],
    ['Express memory `replay`', 'memory', 'replay', 'noop', 15],
    ['Express Redis `first`', 'redis', 'first', 'noop', 60],
    ['Express Redis `replay`', 'redis', 'replay', 'noop', 30],
    ['Fastify memory `first`', 'fastify-memory', 'first', 'fastify-noop', 15],
    ['Fastify memory `replay`', 'fastify-memory', 'replay', 'fastify-bare', 0],
    ['Fastify Redis `first`', 'fastify-redis', 'first', 'fastify-noop', 60],
  ];
  const rpsGoals: [string, Variant, Workload, number][] = [
    ['PostgresStore `first`', 'postgres', 'first', 0.6],
    ['PostgresStore `replay`', 'postgres', 'replay', 0.8],
    ['MySqlStore `first`', 'mysql', 'first', 0.35],
    ['MySqlStore `replay`', 'mysql', 'replay', 0.5],
    ['SqliteStore `first`', 'sqlite', 'first', 0.75],
    ['SqliteStore `replay`', 'sqlite', 'replay', 0.85],
  ];
  const targets: [string, string, string, boolean | null][] = [
    [
      '(floor, reference) noop `first`: req/s / CPU vs bare',
      'n/a',
      `${ratio('noop', 'first', 'rps', 'bare').toFixed(2)} / ${ratio('noop', 'first', 'cpuPerResponseUs', 'bare').toFixed(2)}`,
      null,
    ],
  ];
  // Goals restated from the measured irreducible cost on two shared cores (docs/performance.md, "What
  // the misses are made of"): printed beside the issue's own, which stay as they were set.
  const restatedCpu: Partial<Record<string, [Variant, number]>> = {
    'Fastify memory `first`': ['fastify-noop', 20],
    'Fastify memory `replay`': ['fastify-noop', 15],
  };
  const restatedRps: Partial<Record<string, number>> = { 'PostgresStore `first`': 0.33, 'PostgresStore `replay`': 0.5 };
  const overFloor = (
    name: string,
    v: Variant,
    w: Workload,
    base: Variant,
    limit: number,
  ): [string, string, string, boolean | null] => {
    const got = cpuOver(v, w, base);
    return [
      `${name}: server CPU/response over ${base}`,
      `<= ${base} + ${limit} µs`,
      Number.isNaN(got) ? 'not run' : `${got >= 0 ? '+' : ''}${got.toFixed(1)} µs`,
      Number.isNaN(got) ? null : got <= limit,
    ];
  };
  for (const [name, v, w, base, limit] of cpuGoals) {
    targets.push(overFloor(name, v, w, base, limit));
    const restated = restatedCpu[name];
    if (restated) targets.push(overFloor(`${name} (restated)`, v, w, ...restated));
  }
  for (const [name, v, w, limit] of rpsGoals) {
    targets.push([`${name}: req/s vs bare`, ...atLeast(limit, ratio(v, w, 'rps', 'bare'))]);
    const restated = restatedRps[name];
    if (restated !== undefined)
      targets.push([`${name} (restated): req/s vs bare`, ...atLeast(restated, ratio(v, w, 'rps', 'bare'))]);
  }
  // Observing outcomes: within noise of the quiet path (the machine's noise here is a few per cent).
  for (const [name, v] of has('memory-quiet')
    ? ([
        ['OpenTelemetry API, no SDK', 'memory'],
        ['events listener (does nothing)', 'memory-events'],
      ] as const)
    : []) {
    for (const w of ['first', 'replay'] as const) {
      targets.push([
        `${name} \`${w}\`: CPU/response vs memory-quiet`,
        ...atMost(1.05, ratio(v, w, 'cpuPerResponseUs', 'memory-quiet')),
      ]);
    }
  }
  // A route without @Idempotent() pays nothing for the module: the recorder's stand-ins (Express) and
  // onSend hook (Fastify) pass its response on.
  for (const [name, v, bare] of [
    ['Express', 'undecorated', 'bare'],
    ['Fastify', 'fastify-undecorated', 'fastify-bare'],
  ] as const) {
    if (!has(v)) continue;
    targets.push([
      `${name} route without \`@Idempotent()\` beside one with it: CPU/response vs ${bare}`,
      ...atMost(1.05, ratio(v, 'first', 'cpuPerResponseUs', bare)),
    ]);
  }
  // A route with inFlight: 'wait' and no duplicate: in process, a look for waiters per settle (~0);
  // on Redis, one PUBLISH per first request (reported), none on a replay.
  for (const [name, v, base, limit] of [
    ['`inFlight: wait`, InMemoryStore', 'memory-wait', 'memory-quiet', 1.05],
    ['`inFlight: wait`, RedisStore', 'redis-wait', 'redis', null],
  ] as const) {
    if (!has(v) || !has(base)) continue;
    for (const w of ['first', 'replay'] as const) {
      const got = ratio(v, w, 'cpuPerResponseUs', base);
      targets.push(
        limit === null || w === 'first'
          ? [`${name} \`${w}\`: CPU/response vs ${base} (reported)`, 'n/a', got.toFixed(2), null]
          : [`${name} \`${w}\`: CPU/response vs ${base}`, ...atMost(limit, got)],
      );
    }
  }
  if (has('memory-sealed') && has('memory-quiet')) {
    for (const w of ['first', 'replay'] as const) {
      const got = ratio('memory-sealed', w, 'cpuPerResponseUs', 'memory-quiet');
      targets.push([`encryption \`${w}\`: CPU/response vs memory-quiet (reported)`, 'n/a', got.toFixed(2), null]);
    }
  }
  targets.push(
    [
      'fingerprint of a 1 MiB body, `raw` vs SHA-256 of the bytes',
      '<= 1.50x',
      `${fp1m.rawRatio.toFixed(2)}x`,
      fp1m.rawRatio <= 1.5,
    ],
    [
      'fingerprint of a 1 MiB body, canonical (default) vs SHA-256 of the bytes',
      '<= 10.00x',
      `${fp1m.canonicalRatio.toFixed(2)}x`,
      fp1m.canonicalRatio <= 10,
    ],
    [
      'InMemoryStore heap per record (100-byte body)',
      '<= 600 bytes',
      `${Math.round(micro.heapPerRecord)} bytes`,
      micro.heapPerRecord <= 600,
    ],
  );
  if (budget) {
    targets.push([
      'Redis commands (EVALSHA round trips): first / replay / conflict',
      'exactly 2 / 1 / 1',
      `${evalsha(budget.first)} / ${evalsha(budget.replay)} / ${evalsha(budget.conflict)}`,
      evalsha(budget.first) === 2 && evalsha(budget.replay) === 1 && evalsha(budget.conflict) === 1,
    ]);
  }
  lines.push('', '| target | goal | measured | |', '|---|---|---|---|');
  for (const [name, goal, got, ok] of targets)
    lines.push(`| ${name} | ${goal} | ${got} | ${ok === null ? '' : ok ? 'PASS' : 'MISS'} |`);
  if (budget) {
    lines.push('', '| Redis commands per request (server-side, incl. calls inside the scripts) | |', '|---|---|');
    lines.push(
      `| first | ${cmds(budget.first)} |`,
      `| replay | ${cmds(budget.replay)} |`,
      `| conflict (409) | ${cmds(budget.conflict)} |`,
    );
  }
  lines.push('', '| micro-benchmark | result |', '|---|---|');
  lines.push(
    `| InMemoryStore claim+commit with 200,000 records held, ${CONNECTIONS} at a time | ${Math.round(micro.ops.claimCommit).toLocaleString('en')} /s |`,
  );
  lines.push(
    `| InMemoryStore read (claim of a completed key) with 200,000 records, ${CONNECTIONS} at a time | ${Math.round(micro.ops.read).toLocaleString('en')} /s |`,
  );
  for (const f of micro.fingerprint) {
    lines.push(
      `| fingerprint ${f.size} JSON body | canonical ${f.canonicalUs.toFixed(1)} µs (${f.canonicalRatio.toFixed(2)}x), raw ${f.rawUs.toFixed(1)} µs (${f.rawRatio.toFixed(2)}x); SHA-256 of the bytes ${f.sha256Us.toFixed(1)} µs |`,
    );
  }
  lines.push('', '| correctness in this run | |', '|---|---|');
  for (const v of VARIANTS) lines.push(`| ${v} | ${correctness[v]} |`);
  return lines.join('\n');
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  stopAll();
  process.exit(1);
});
