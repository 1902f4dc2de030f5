import { type ChildProcess, spawn } from 'node:child_process';
import { Agent, type IncomingHttpHeaders, request } from 'node:http';
import { track } from './processes.js';
import { sleep } from './timing.js';

export interface PodOptions {
  /** The idempotency store (the sample's STORE); default 'redis' with `redisUrl`, else 'memory'. */
  store?: 'sqlite' | 'memory' | 'redis' | 'postgres' | 'mysql';
  redisUrl?: string;
  /** PostgreSQL connection string, for `store: 'postgres'`. */
  postgresUrl?: string;
  /** MySQL connection string, for `store: 'mysql'`. */
  mysqlUrl?: string;
  /** Extra environment variables. */
  env?: NodeJS.ProcessEnv;
  /** SQLite file of the payments sample. */
  database?: string;
  adapter?: 'express' | 'fastify';
  leaseMs?: number;
  providerLatencyMs?: number;
  /** Extra arguments for node, before the script. */
  nodeArgs?: string[];
  /** Which sample: the payments API (default) or the ledger (charges in PostgreSQL, SAMPLE=ledger). */
  sample?: 'payments' | 'ledger';
}

/** What the pod answers with 200 once it is up. */
const READY_PATH = { payments: '/api/payments', ledger: '/api/ledger/charges' } as const;

/** The compiled sample app (.build/, compiled on demand by test/support/build.ts) in a process of its own on 127.0.0.1. */
export class Pod {
  private constructor(
    private readonly child: ChildProcess,
    readonly base: string,
    readonly output: string[],
  ) {}

  static async start(options: PodOptions): Promise<Pod> {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      NODE_ENV: 'test',
      // The pod listens on a port the system picks and says which: never one chosen here and taken meanwhile.
      PORT: '0',
      HOST: '127.0.0.1',
      DATABASE: options.database ?? '',
      ADAPTER: options.adapter ?? 'express',
      STORE: options.store ?? (options.redisUrl ? 'redis' : 'memory'),
      REDIS_URL: options.redisUrl ?? '',
      DATABASE_URL: options.postgresUrl ?? options.mysqlUrl ?? '',
      IDEMPOTENCY_LEASE_MS: options.leaseMs === undefined ? '' : String(options.leaseMs),
      PAYMENT_PROVIDER_LATENCY_MS: String(options.providerLatencyMs ?? 0),
      SAMPLE: options.sample ?? 'payments',
      ...options.env,
    };
    const child = track(
      spawn(process.execPath, [...(options.nodeArgs ?? []), '.build/sample/main.js'], { env, stdio: ['ignore', 'pipe', 'pipe'] }),
    );
    const output: string[] = [];
    child.stdout?.on('data', (d) => output.push(String(d)));
    child.stderr?.on('data', (d) => output.push(String(d)));
    let base: string | undefined;
    for (let i = 0; i < 400 && !base; i++) {
      if (child.exitCode !== null) throw new Error(`pod exited with ${child.exitCode}: ${output.join('')}`);
      base = /API on (http:\/\/127\.0\.0\.1:\d+)\/api/.exec(output.join(''))?.[1];
      if (!base) await sleep(50);
    }
    const pod = new Pod(child, base ?? 'http://127.0.0.1:0', output);
    for (let i = 0; i < 200 && base; i++) {
      if (child.exitCode !== null) throw new Error(`pod exited with ${child.exitCode}: ${output.join('')}`);
      try {
        const res = await fetch(`${pod.base}${READY_PATH[options.sample ?? 'payments']}`, {
          headers: { authorization: 'Bearer alice-token' },
        });
        if (res.status === 200) return pod;
      } catch {
        // not listening yet
      }
      await sleep(50);
    }
    await pod.kill();
    throw new Error(`pod did not come up: ${output.join('')}`);
  }

  /**
   * SIGTERM, as a rolling deploy sends it (the sample has shutdown hooks on); resolves with the exit
   * code, or the signal (Nest ends the process with the same signal once it has closed).
   */
  terminate(): Promise<number | string | null> {
    if (this.child.exitCode !== null || this.child.signalCode !== null)
      return Promise.resolve(this.child.exitCode ?? this.child.signalCode);
    const exited = new Promise<number | string | null>((r) => this.child.once('exit', (code, signal) => r(code ?? signal)));
    this.child.kill('SIGTERM');
    return exited;
  }

  /** Whether the process has ended (a fault it was started with can end it by itself). */
  get exited(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  /** Sends a signal by PID: SIGSTOP and SIGCONT freeze and thaw the pod (a stop-the-world pause, a throttled container). */
  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Ends the process by PID: SIGKILL, as a crashing pod would. */
  kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return Promise.resolve();
    const exited = new Promise<void>((r) => this.child.once('exit', () => r()));
    this.child.kill('SIGKILL');
    return exited;
  }
}

export interface Answer {
  status: number;
  text: string;
  replayed: boolean;
}

/** POSTs a payment as Alice (or another token). */
export async function pay(
  base: string,
  key: string,
  body: unknown = { amount: 100, currency: 'EUR' },
  token = 'alice-token',
): Promise<Answer> {
  const res = await post(`${base}/api/payments`, JSON.stringify(body), {
    authorization: `Bearer ${token}`,
    'idempotency-key': key,
    'content-type': 'application/json',
  });
  return { status: res.status, text: res.text, replayed: res.headers['idempotent-replayed'] === 'true' };
}

/**
 * Kept-alive sockets, shared by every request of this process. The load suites send tens of thousands
 * of requests: Node's `fetch` costs the client (inside jest's VM) more CPU than both pods together.
 */
const agent = new Agent({ keepAlive: true, maxSockets: 128 });

/**
 * A POST over node:http: status, headers and body text. A kept-alive socket the server closed as idle
 * just as this request took it fails with ECONNRESET before the server read anything: sent again once
 * on a fresh socket, as Node's documentation advises (`request.reusedSocket`). Any other error fails.
 */
export function post(
  url: string,
  body: string,
  headers: Record<string, string>,
  retried = false,
): Promise<{ status: number; headers: IncomingHttpHeaders; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: 'POST', agent, headers: { ...headers, 'content-length': Buffer.byteLength(body) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (!retried && req.reusedSocket && err.code === 'ECONNRESET') resolve(post(url, body, headers, true));
      else reject(err);
    });
    req.end(body);
  });
}

/** Runs `tasks` with at most `limit` in flight. */
export async function pooled<T>(limit: number, tasks: (() => Promise<T>)[]): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const i = next++;
      results[i] = await tasks[i]();
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, worker));
  return results;
}
