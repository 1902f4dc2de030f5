import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { track } from './processes.js';
import { sleep } from './timing.js';

/**
 * Whether the NATS suites can run (Debian's nats-server installed). Without it they are skipped
 * loudly, unless REQUIRE_NATS=1 (CI), where that is a failure.
 */
export function natsAvailable(suite: string): boolean {
  try {
    execFileSync('sh', ['-c', 'command -v nats-server'], { stdio: 'ignore' });
    return true;
  } catch {
    const message = `${suite}: no nats-server binary (Debian's nats-server package)`;
    if (process.env.REQUIRE_NATS === '1') throw new Error(`${message}, but REQUIRE_NATS=1`);
    process.stderr.write(`\n!!! SKIPPING ${message} !!!\n\n`);
    return false;
  }
}

/** A private nats-server on a loopback port it picks itself (`-p -1`) and names in its log; stopped by PID. */
export class NatsServer {
  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
  ) {}

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  static async start(): Promise<NatsServer> {
    const child = track(spawn('nats-server', ['-a', '127.0.0.1', '-p', '-1'], { stdio: ['ignore', 'pipe', 'pipe'] }));
    const output: string[] = [];
    child.stdout?.on('data', (d) => output.push(String(d)));
    child.stderr?.on('data', (d) => output.push(String(d)));
    for (let i = 0; i < 400; i++) {
      if (child.exitCode !== null) throw new Error(`nats-server exited with ${child.exitCode}: ${output.join('')}`);
      const log = output.join('');
      const port = /Listening for client connections on 127\.0\.0\.1:(\d+)/.exec(log)?.[1];
      if (port && log.includes('Server is ready')) return new NatsServer(child, Number(port));
      await sleep(25);
    }
    child.kill('SIGKILL');
    throw new Error(`nats-server did not start within 10 s: ${output.join('')}`);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGKILL');
    await exited;
  }
}
