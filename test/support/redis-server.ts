import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startRetried } from './ports.js';
import { track } from './processes.js';
import { sleep } from './timing.js';

/**
 * A port P with P and P + 10000 (the cluster bus port) both free, below the kernel's ephemeral range
 * (32768 and up on Linux), so neither can be taken by the outgoing sockets of earlier suites.
 */
async function freeClusterPort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20000 + Math.floor(Math.random() * 2700);
    try {
      await freePort(port);
      await freePort(port + 10000);
      return port;
    } catch {
      // taken: try another
    }
  }
  throw new Error('no free port pair for a cluster node');
}

function hasBinary(name: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether the Redis suites can run: REDIS_URL points at a server, or a redis-server binary exists.
 * Without either they are skipped loudly, unless REQUIRE_REDIS=1 (CI), where that is a failure.
 */
export function redisAvailable(suite: string): boolean {
  if (process.env.REDIS_URL || hasBinary('redis-server')) return true;
  const message = `${suite}: no redis-server binary and no REDIS_URL`;
  if (process.env.REQUIRE_REDIS === '1') throw new Error(`${message}, but REQUIRE_REDIS=1`);
  process.stderr.write(`\n!!! SKIPPING ${message} (install redis-server or set REDIS_URL) !!!\n\n`);
  return false;
}

export function clusterAvailable(suite: string): boolean {
  if (hasBinary('redis-server') && hasBinary('redis-cli')) return true;
  const message = `${suite}: needs redis-server and redis-cli to start a cluster`;
  if (process.env.REQUIRE_REDIS === '1') throw new Error(`${message}, but REQUIRE_REDIS=1`);
  process.stderr.write(`\n!!! SKIPPING ${message} !!!\n\n`);
  return false;
}

async function waitForPing(port: number, child?: ChildProcess): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (child && child.exitCode !== null) throw new Error(`redis-server on ${port} exited with ${child.exitCode}`);
    try {
      const out = execFileSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), 'PING'], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      });
      if (out.trim() === 'PONG') return;
    } catch {
      // not up yet
    }
    await sleep(50);
  }
  throw new Error(`redis-server on ${port} did not answer PING within 5 s`);
}

/** A private redis-server on a loopback port, started and stopped by PID. */
export class RedisServer {
  private child: ChildProcess | undefined;
  private constructor(
    readonly port: number,
    private readonly external: boolean,
    private readonly extraArgs: string[],
  ) {}

  get url(): string {
    return this.external ? process.env.REDIS_URL! : `redis://127.0.0.1:${this.port}`;
  }

  /**
   * Starts one (or uses REDIS_URL, which tests that stop the server cannot use). A port can be taken
   * between choosing and binding it, so a server that exits at startup is retried on another port.
   */
  static async start(extraArgs: string[] = [], options: { ownServer?: boolean; cluster?: boolean } = {}): Promise<RedisServer> {
    if (process.env.REDIS_URL && !options.ownServer) {
      return new RedisServer(Number(new URL(process.env.REDIS_URL).port || 6379), true, []);
    }
    return startRetried(
      async () => new RedisServer(options.cluster ? await freeClusterPort() : await freePort(), false, extraArgs),
    );
  }

  /** (Re)starts the process on the same port. */
  async resume(): Promise<void> {
    if (this.external) throw new Error('cannot restart the REDIS_URL server');
    this.child = track(
      spawn(
        'redis-server',
        ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...this.extraArgs],
        {
          stdio: 'ignore',
        },
      ),
    );
    await waitForPing(this.port, this.child);
  }

  /** Kills the process by PID and waits for it to exit. */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }

  /** Runs redis-cli against this server. */
  cli(...args: string[]): string {
    const target = this.external ? ['-u', this.url] : ['-h', '127.0.0.1', '-p', String(this.port)];
    return execFileSync('redis-cli', [...target, ...args], { encoding: 'utf8' });
  }

  /** Calls per command name from INFO commandstats. */
  commandStats(): Record<string, number> {
    const stats: Record<string, number> = {};
    for (const line of this.cli('INFO', 'commandstats').split('\n')) {
      const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
      if (m) stats[m[1]] = Number(m[2]);
    }
    return stats;
  }
}

/** Three masters on loopback, joined with redis-cli --cluster create. */
export class RedisCluster {
  private constructor(
    readonly nodes: RedisServer[],
    private readonly dir: string,
  ) {}

  static async start(): Promise<RedisCluster> {
    const dir = mkdtempSync(join(tmpdir(), 'idem-cluster-'));
    const cluster = new RedisCluster([], dir);
    try {
      for (let i = 0; i < 3; i++) {
        cluster.nodes.push(
          await RedisServer.start(
            [
              '--cluster-enabled',
              'yes',
              '--cluster-config-file',
              join(dir, `nodes-${i}.conf`),
              '--dir',
              dir,
              '--cluster-node-timeout',
              '2000',
            ],
            { ownServer: true, cluster: true },
          ),
        );
      }
      execFileSync(
        'redis-cli',
        ['--cluster', 'create', ...cluster.nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes'],
        {
          stdio: 'ignore',
        },
      );
      for (let i = 0; i < 100; i++) {
        if (cluster.nodes.every((n) => n.cli('CLUSTER', 'INFO').includes('cluster_state:ok'))) return cluster;
        await sleep(100);
      }
      throw new Error('the cluster did not reach cluster_state:ok');
    } catch (error) {
      // Nodes already started would otherwise outlive the suite.
      await cluster.stop();
      throw error;
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.stop()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}
