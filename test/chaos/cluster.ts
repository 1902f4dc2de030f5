import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type IdempotencyStore, MySqlStore, PostgresStore, RedisStore, SqliteStore } from '../../lib/index.js';
import { type ClientProxy, ClientProxyFactory, Transport } from '@nestjs/microservices';
import { firstValueFrom, timeout } from 'rxjs';
import { FakeProvider } from '../support/fake-provider.js';
import { NatsServer, natsAvailable } from '../support/nats-server.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { Pod } from '../support/pod.js';
import { MySqlServer } from '../support/mysql-server.js';
import { PostgresServer } from '../support/postgres-server.js';
import { track } from '../support/processes.js';
import { RedisServer } from '../support/redis-server.js';
import { sleep } from '../support/timing.js';
import type { HistoryLine } from './history.js';
import { redisLatencies, watchStalls } from './stalls.js';

/**
 * What the pods keep their idempotency state in; `postgres-tx` and `mysql-tx` are the ledger sample's
 * transactional route (and, on PostgreSQL, its rides in atomic phases).
 */
export type StoreKind = 'memory' | 'redis' | 'postgres' | 'sqlite' | 'postgres-tx' | 'mysql' | 'mysql-tx';

/** The ledger sample's stores: transactional charges, business rows beside the records. */
export const isLedger = (store: StoreKind): boolean => store === 'postgres-tx' || store === 'mysql-tx';
const onPostgres = (store: StoreKind): boolean => store === 'postgres' || store === 'postgres-tx';
const onMySql = (store: StoreKind): boolean => store === 'mysql' || store === 'mysql-tx';

/** A pod as the fault-injection runner handles it: the chaos pod (chaos-pod.ts) or a ledger sample pod. */
export interface RunningPod {
  readonly name: string;
  readonly base: string;
  signal(signal: NodeJS.Signals): void;
  terminate(): Promise<unknown>;
  kill(): Promise<void>;
}

/** The compiled chaos pod (.build/test/chaos/chaos-pod.js) in a process of its own. */
class ChaosPod implements RunningPod {
  private constructor(
    readonly name: string,
    private readonly child: ChildProcess,
    readonly base: string,
  ) {}

  static async start(name: string, env: NodeJS.ProcessEnv): Promise<ChaosPod> {
    const child = track(
      spawn(process.execPath, ['.build/test/chaos/chaos-pod.js'], {
        env: { ...process.env, NODE_ENV: 'test', POD: name, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    const output: string[] = [];
    child.stdout?.on('data', (d) => output.push(String(d)));
    child.stderr?.on('data', (d) => output.push(String(d)));
    for (let i = 0; i < 600; i++) {
      if (child.exitCode !== null) throw new Error(`chaos pod ${name} exited with ${child.exitCode}: ${output.join('')}`);
      const base = /chaos pod \S+ on (http:\/\/127\.0\.0\.1:\d+)/.exec(output.join(''))?.[1];
      if (base) return new ChaosPod(name, child, `${base}/chaos`);
      await sleep(50);
    }
    child.kill('SIGKILL');
    throw new Error(`chaos pod ${name} did not come up: ${output.join('')}`);
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  terminate(): Promise<unknown> {
    return this.end('SIGTERM');
  }

  async kill(): Promise<void> {
    await this.end('SIGKILL');
  }

  private end(signal: NodeJS.Signals): Promise<unknown> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return Promise.resolve(this.child.exitCode);
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.kill(signal);
    // A stopped process takes no SIGTERM until it runs again.
    this.child.kill('SIGCONT');
    return exited;
  }
}

/** A ledger sample pod under the runner's name: its charges (transactional) and rides (atomic phases) routes. */
class LedgerPod implements RunningPod {
  constructor(
    readonly name: string,
    private readonly pod: Pod,
  ) {}

  get base(): string {
    return `${this.pod.base}/api/ledger`;
  }

  /** What the pod printed so far (its log lines). */
  get output(): string {
    return this.pod.output.join('');
  }

  signal(signal: NodeJS.Signals): void {
    this.pod.signal(signal);
  }

  terminate(): Promise<unknown> {
    this.pod.signal('SIGCONT');
    return this.pod.terminate();
  }

  kill(): Promise<void> {
    return this.pod.kill();
  }
}

export interface ClusterOptions {
  store: StoreKind;
  /** App processes (one for the in-memory store, whose state dies with its process). */
  pods: number;
  leaseMs: number;
  /** The chaos pod's slow handler, in ms. */
  slowMs: number;
  /** Connections of each pod's PostgreSQL pool (the store's default when unset): a small pool under a burst. */
  poolSize?: number;
}

/**
 * A store server of its own (Redis with an append-only file, so a restart keeps what was stored;
 * PostgreSQL; a SQLite file), one fault proxy per pod slot in front of it, and the pods, alternating
 * Express and Fastify. Pods append to one history log.
 */
export class Cluster {
  readonly slots: (RunningPod | undefined)[];
  readonly proxies: FaultProxy[] = [];
  readonly log: string;
  redis: RedisServer | undefined;
  postgres: PostgresServer | undefined;
  mysql: MySqlServer | undefined;
  /** The MySQL database the pods share (its URL, without a proxy). */
  private mysqlUrl: string | undefined;
  /** The rides route's payment provider (`postgres-tx`): deduplicates by key, counts every call. */
  provider: FakeProvider | undefined;
  /** The chaos pods' NATS server (not on `postgres-tx`, nor where nats-server is not installed), and the client's connection. */
  nats: NatsServer | undefined;
  private natsClient: ClientProxy | undefined;
  /** Every ledger pod started, dead ones too: their logs say what their completers finished. */
  private readonly ledgerPods: LedgerPod[] = [];
  private readonly dir: string;
  private inspector: IdempotencyStore | undefined;
  private started = 0;
  private unwatch: (() => void) | undefined;

  private constructor(readonly options: ClusterOptions) {
    this.dir = mkdtempSync(join(tmpdir(), `idem-chaos-${options.store}-`));
    this.log = join(this.dir, 'history.jsonl');
    writeFileSync(this.log, '');
    this.slots = new Array<RunningPod | undefined>(options.pods).fill(undefined);
  }

  static async start(options: ClusterOptions): Promise<Cluster> {
    const cluster = new Cluster(options);
    try {
      await cluster.startServer();
      await Promise.all(cluster.slots.map((_, slot) => cluster.startPod(slot)));
      return cluster;
    } catch (error) {
      await cluster.stop();
      throw error;
    }
  }

  get sqliteFile(): string {
    return join(this.dir, 'idempotency.db');
  }

  /** The store's own address, without a proxy. */
  get storeUrl(): string {
    return this.redis?.url ?? this.postgres?.url ?? this.mysqlUrl ?? this.sqliteFile;
  }

  private async startServer(): Promise<void> {
    const { store } = this.options;
    if (store === 'redis') {
      const threshold = String(Math.round(this.options.leaseMs / 3));
      this.redis = await RedisServer.start(
        ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', this.dir, '--latency-monitor-threshold', threshold],
        { ownServer: true },
      );
    } else if (onPostgres(store)) {
      this.postgres = await PostgresServer.start({ ownServer: true });
    } else if (onMySql(store)) {
      this.mysql = await MySqlServer.start({ ownServer: true });
      this.mysqlUrl = await this.mysql.createDatabase('chaos');
    }
    if (store === 'postgres-tx') this.provider = await FakeProvider.start();
    // The ledger on MySQL has charges only: no rides (so no provider), and no NATS handler.
    else if (store !== 'mysql-tx' && natsAvailable('fault-injection suite (NATS)')) {
      this.nats = await NatsServer.start();
      this.natsClient = ClientProxyFactory.create({ transport: Transport.NATS, options: { servers: [this.nats.url] } });
      await this.natsClient.connect();
    }
    if (this.redis || this.postgres || this.mysql) {
      const port = Number(new URL(this.storeUrl).port);
      for (let i = 0; i < this.options.pods; i++) this.proxies.push(await FaultProxy.start(port));
      // Every pod's store traffic passes through this process: when the machine starves it, every
      // pod's path to the store stands still, which the checker must know as it knows a cut.
      this.unwatch = watchStalls(this.options.leaseMs / 3, (from, at) => {
        const line: HistoryLine = { t: 'stall', pod: 'proxies', from, at, store: true };
        appendFileSync(this.log, `${JSON.stringify(line)}\n`);
      });
    }
  }

  /** (Re)starts the pod of a slot, behind the slot's proxy (a slot past the pods shares the first's); `env` for the ledger pod. */
  async startPod(slot: number, env: NodeJS.ProcessEnv = {}): Promise<RunningPod> {
    const { store, leaseMs, slowMs } = this.options;
    const name = `p${slot}.${++this.started}`;
    const adapter = slot % 2 === 0 ? 'express' : 'fastify';
    const url = (this.proxies[slot] ?? this.proxies[0])?.url(this.storeUrl) ?? this.storeUrl;
    const pod = isLedger(store)
      ? new LedgerPod(
          name,
          await Pod.start({
            sample: 'ledger',
            store: store === 'mysql-tx' ? 'mysql' : 'postgres',
            ...(store === 'mysql-tx' ? { mysqlUrl: url } : { postgresUrl: url }),
            adapter,
            leaseMs,
            providerLatencyMs: slowMs / 2,
            env: {
              // A transactional route's lease is its transaction timeout, never renewed: the same length here.
              TRANSACTION_TIMEOUT_MS: String(leaseMs),
              PAYMENT_PROVIDER_URL: this.provider?.url ?? '',
              // Every pod runs the completer: rides whose client went away (or whose pod died) are
              // finished by it, racing the clients' own retries.
              COMPLETER_INTERVAL_MS: String(leaseMs / 2),
              COMPLETER_IDLE_MS: String(leaseMs * 2),
              ...env,
            },
          }),
        )
      : await ChaosPod.start(name, {
          STORE: store,
          STORE_URL: url,
          ADAPTER: adapter,
          LOG: this.log,
          LEASE_MS: String(leaseMs),
          SLOW_MS: String(slowMs),
          POOL_SIZE: this.options.poolSize ? String(this.options.poolSize) : '',
          NATS_URL: this.nats?.url ?? '',
        });
    if (pod instanceof LedgerPod) this.ledgerPods.push(pod);
    this.slots[slot] = pod;
    return pod;
  }

  /** A NATS request as the pods' handler takes it: its reply with 200, its error's status (500 without one), 0 for no answer in time. */
  async natsRequest(subject: string, data: object, timeoutMs: number): Promise<{ status: number; text: string }> {
    try {
      const reply = await firstValueFrom(this.natsClient!.send(subject, data).pipe(timeout(timeoutMs)));
      return { status: 200, text: JSON.stringify(reply) };
    } catch (error) {
      const status = (error as { status?: unknown }).status;
      if ((error as Error).name === 'TimeoutError') return { status: 0, text: 'TimeoutError' };
      return { status: typeof status === 'number' ? status : 500, text: JSON.stringify(error) };
    }
  }

  /** Runs the ledger pods' completers drove through their last phase so far. */
  completions(): number {
    return this.ledgerPods.reduce((n, pod) => n + pod.output.split('the completer drove an abandoned run').length - 1, 0);
  }

  /** Starts a pod that takes no requests until {@link join} puts it in a slot of its own. */
  async standby(env: NodeJS.ProcessEnv): Promise<RunningPod> {
    const pod = await this.startPod(this.slots.length, env);
    this.slots.pop();
    return pod;
  }

  /** Pods to send requests to. */
  bases(): { pod: string; base: string }[] {
    return this.slots.filter((p): p is RunningPod => p !== undefined).map((p) => ({ pod: p.name, base: p.base }));
  }

  /** The pods' log, the proxies' stalls, and the stalls Redis's latency monitor recorded (since its last start). */
  history(): HistoryLine[] {
    const lines = readFileSync(this.log, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as HistoryLine);
    const redis = this.redis;
    if (!redis) return lines;
    let latencies: { from: number; at: number }[] = [];
    try {
      latencies = redisLatencies(redis.cli('LATENCY', 'LATEST'), (event) => redis.cli('LATENCY', 'HISTORY', event));
    } catch {
      // Redis is down (a fault that stopped it left it so): it recorded nothing to read.
    }
    return [...lines, ...latencies.map((s): HistoryLine => ({ t: 'stall', pod: 'redis', ...s, store: true }))];
  }

  /** Headers of a tenant's requests: the chaos pod's tenant header, or the ledger's bearer token. */
  headers(tenant: string): Record<string, string> {
    return isLedger(this.options.store) ? { authorization: `Bearer ${tenant}-token` } : { 'x-tenant': tenant };
  }

  /** The keys of `ids` (`tenant/key`) whose claim the store still holds, live. */
  async heldClaims(ids: string[]): Promise<string[]> {
    const inspector = await this.openInspector();
    if (!inspector?.peek) return [];
    const held: string[] = [];
    for (const id of ids) {
      const [tenant, key] = id.split('/');
      const scope = isLedger(this.options.store) ? `acct_${tenant}` : tenant;
      const entry = await inspector.peek(`idem:${scope}:${key}`);
      if (entry?.state === 'in-flight') held.push(id);
    }
    return held;
  }

  /** Business rows per `tenant/key`: the ledger's charges, and its rides (a ride's origin is its key). */
  async rows(): Promise<Map<string, number>> {
    if (this.mysql) {
      const charges = await this.mysql.query<{ account_id: string; key: string; n: number }>(
        'SELECT account_id, idempotency_key AS `key`, count(*) AS n FROM charges GROUP BY 1, 2',
        [],
        this.mysqlUrl,
      );
      return new Map(charges.map((r) => [`${r.account_id.replace(/^acct_/, '')}/${r.key}`, Number(r.n)]));
    }
    const rows = await this.postgres!.query<{ account_id: string; key: string; n: number }>(
      `SELECT account_id, idempotency_key AS key, count(*)::int AS n FROM charges GROUP BY 1, 2
       UNION ALL SELECT account_id, origin, count(*)::int FROM rides GROUP BY 1, 2`,
    );
    return new Map(rows.map((r) => [`${r.account_id.replace(/^acct_/, '')}/${r.key}`, r.n]));
  }

  /** Rides (`tenant/key`) not charged or without their receipt: half done, unless the provider declined them. */
  async unfinishedRides(): Promise<string[]> {
    if (!this.postgres) return [];
    const rows = await this.postgres.query<{ account_id: string; origin: string }>(
      'SELECT account_id, origin FROM rides WHERE charge_id IS NULL OR NOT receipt_queued',
    );
    return rows.map((r) => `${r.account_id.replace(/^acct_/, '')}/${r.origin}`);
  }

  /** The payment provider's calls for the charge of each ride (`tenant/key`), by the key the run derived. */
  providerCalls(ids: string[]): Map<string, number> {
    const calls = new Map<string, number>();
    for (const id of ids) {
      const [tenant, key] = id.split('/');
      const derived = createHash('sha256')
        .update(`idem:acct_${tenant}:${key}`)
        .update('\n')
        .update('charge_created')
        .digest('base64url');
      calls.set(id, this.provider?.callsWith(derived) ?? 0);
    }
    return calls;
  }

  private async openInspector(): Promise<IdempotencyStore | undefined> {
    if (this.inspector) return this.inspector;
    const { store } = this.options;
    if (store === 'redis') this.inspector = new RedisStore({ url: this.storeUrl });
    else if (onPostgres(store)) this.inspector = new PostgresStore({ connectionString: this.storeUrl, createSchema: false });
    else if (onMySql(store)) this.inspector = new MySqlStore({ uri: this.storeUrl, createSchema: false, sweepIntervalMs: 0 });
    else if (store === 'sqlite') this.inspector = new SqliteStore({ filename: this.sqliteFile, createSchema: false });
    await this.inspector?.open?.();
    return this.inspector;
  }

  /** Takes an exclusive lock on the SQLite file in another process; resolves once it is held, with its release after `ms`. */
  async lockSqlite(ms: number): Promise<{ released: Promise<unknown> }> {
    const child = track(
      spawn(
        process.execPath,
        [
          '-e',
          `const D=require('better-sqlite3');const d=new D(process.argv[1],{timeout:10000});d.exec('BEGIN EXCLUSIVE');` +
            `console.log('locked');setTimeout(()=>{d.exec('COMMIT');d.close();},Number(process.argv[2]));`,
          this.sqliteFile,
          String(ms),
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      ),
    );
    const released = new Promise((r) => child.once('exit', r));
    await new Promise<void>((resolve) => child.stdout?.once('data', () => resolve()));
    return { released };
  }

  async stop(): Promise<void> {
    this.unwatch?.();
    await Promise.all(this.slots.map(async (p) => p?.kill()));
    await this.inspector?.close?.();
    await Promise.all(this.proxies.map((p) => p.close()));
    await this.redis?.stop();
    await this.postgres?.destroy();
    await this.mysql?.destroy();
    await this.provider?.stop();
    await Promise.resolve(this.natsClient?.close()).catch(() => undefined);
    await this.nats?.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
