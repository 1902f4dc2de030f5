import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import amqp from 'amqplib';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startRetried } from './ports.js';
import { track } from './processes.js';
import { sleep } from './timing.js';

/** Debian's rabbitmq-server package: the script that runs the broker as the current user. */
const RABBITMQ = '/usr/lib/rabbitmq/bin/rabbitmq-server';
const RABBITMQCTL = '/usr/lib/rabbitmq/bin/rabbitmqctl';

/**
 * Whether the RabbitMQ suites can run (Debian's rabbitmq-server installed). Without it they are
 * skipped loudly, unless REQUIRE_RABBITMQ=1 (CI), where that is a failure.
 */
export function rabbitAvailable(suite: string): boolean {
  if (existsSync(RABBITMQ)) return true;
  const message = `${suite}: no ${RABBITMQ} (Debian's rabbitmq-server package)`;
  if (process.env.REQUIRE_RABBITMQ === '1') throw new Error(`${message}, but REQUIRE_RABBITMQ=1`);
  process.stderr.write(`\n!!! SKIPPING ${message} !!!\n\n`);
  return false;
}

/**
 * Whether an AMQP handshake with the broker at `url` completes. An open port is not enough: the
 * broker accepts TCP before it is ready and may close the socket mid-handshake ("Socket closed
 * abruptly during opening handshake", a CI failure of stop 42), and a port chosen free can meanwhile
 * be another server's (a PostgreSQL started beside the broker answers AMQP the same way).
 */
async function amqpReady(url: string): Promise<boolean> {
  try {
    const connection = await amqp.connect(url, { timeout: 5_000 });
    await connection.close();
    return true;
  } catch {
    return false;
  }
}

/**
 * A private RabbitMQ broker on loopback ports, in a temp folder, started and stopped by PID. Erlang's
 * port mapper (epmd) normally listens on the fixed port 4369 and outlives the broker: this one gets a
 * free port and is this broker's own child, stopped with it.
 */
export class RabbitMqServer {
  private broker: ChildProcess | undefined;
  private epmd: ChildProcess | undefined;
  readonly output: string[] = [];

  private constructor(
    readonly port: number,
    private readonly distPort: number,
    private readonly epmdPort: number,
    private readonly dir: string,
  ) {}

  get url(): string {
    return `amqp://guest:guest@127.0.0.1:${this.port}`;
  }

  static start(): Promise<RabbitMqServer> {
    return startRetried(
      async () =>
        new RabbitMqServer(await freePort(), await freePort(), await freePort(), mkdtempSync(join(tmpdir(), 'idem-rabbit-'))),
    );
  }

  private get env(): NodeJS.ProcessEnv {
    return {
      ...process.env,
      // The Erlang cookie is written to $HOME: a folder of this broker's own.
      HOME: this.dir,
      ERL_EPMD_PORT: String(this.epmdPort),
      RABBITMQ_NODENAME: `idem${this.port}@localhost`,
      RABBITMQ_NODE_IP_ADDRESS: '127.0.0.1',
      RABBITMQ_NODE_PORT: String(this.port),
      RABBITMQ_DIST_PORT: String(this.distPort),
      RABBITMQ_MNESIA_BASE: join(this.dir, 'mnesia'),
      RABBITMQ_LOG_BASE: join(this.dir, 'log'),
      RABBITMQ_LOGS: '-',
      RABBITMQ_ENABLED_PLUGINS_FILE: join(this.dir, 'enabled_plugins'),
      RABBITMQ_CONFIG_FILE: join(this.dir, 'rabbitmq'),
      RABBITMQ_ADVANCED_CONFIG_FILE: join(this.dir, 'advanced.config'),
      RABBITMQ_PID_FILE: join(this.dir, 'pid'),
      // The script then execs the Erlang VM instead of starting it as a child: the PID we kill is the
      // broker's (a killed script left its VM running, one orphaned broker per suite).
      RUNNING_UNDER_SYSTEMD: 'true',
    };
  }

  async resume(): Promise<void> {
    const { env } = this;
    if (!this.epmd || this.epmd.exitCode !== null) {
      this.epmd = track(spawn('epmd', ['-port', String(this.epmdPort), '-address', '127.0.0.1'], { stdio: 'ignore', env }));
    }
    this.broker = track(spawn(RABBITMQ, [], { cwd: this.dir, env, stdio: ['ignore', 'pipe', 'pipe'] }));
    this.broker.stdout?.on('data', (d) => this.output.push(String(d)));
    this.broker.stderr?.on('data', (d) => this.output.push(String(d)));
    // Ready once a handshake completes; a broker that exits (its port taken) is started again elsewhere.
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      if (this.broker.exitCode !== null) {
        throw new Error(
          `rabbitmq-server on ${this.port} exited with ${this.broker.exitCode}: ${this.output.join('').slice(-2000)}`,
        );
      }
      if (await amqpReady(this.url)) return;
      await sleep(50);
    }
    throw new Error(
      `rabbitmq-server on ${this.port} completed no AMQP handshake within 60 s: ${this.output.join('').slice(-2000)}`,
    );
  }

  /**
   * Ready and unacknowledged messages of a queue, as the broker counts them (rabbitmqctl: AMQP shows
   * only the ready ones, and a delivery a consumer holds is exactly what a test needs to see).
   */
  async queue(name: string): Promise<{ ready: number; unacked: number }> {
    const args = ['-n', `idem${this.port}@localhost`, '-q', 'list_queues', 'name', 'messages_ready', 'messages_unacknowledged'];
    const { stdout } = await promisify(execFile)(RABBITMQCTL, args, { env: this.env, timeout: 60_000 });
    const row = stdout
      .split('\n')
      .map((line) => line.trim().split(/\s+/))
      .find((cells) => cells[0] === name);
    return { ready: Number(row?.[1] ?? 0), unacked: Number(row?.[2] ?? 0) };
  }

  /**
   * Stops the broker (SIGTERM: it writes what it holds, as an orderly restart of a node does) and
   * starts it again on the same ports and data: durable queues and persistent messages survive.
   */
  async restart(): Promise<void> {
    const broker = this.broker;
    if (broker && broker.exitCode === null && broker.signalCode === null) {
      const exited = new Promise((r) => broker.once('exit', r));
      broker.kill('SIGTERM');
      await exited;
    }
    await this.resume();
  }

  /** Kills the broker and its port mapper by PID, waits for both, and removes the temp folder. */
  async stop(): Promise<void> {
    const children = [this.broker, this.epmd];
    this.broker = this.epmd = undefined;
    await Promise.all(
      children.map(async (child) => {
        if (!child || child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGKILL');
        await exited;
      }),
    );
    rmSync(this.dir, { recursive: true, force: true });
  }
}
