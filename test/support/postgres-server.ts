import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { track } from './processes.js';
import { freePort, startRetried } from './ports.js';
import { sleep } from './timing.js';

// A throwaway PostgreSQL server for the tests, like the Redis one: initdb into a temporary folder,
// the server on a free loopback port with fsync off, stopped by PID. PG_URL points the suites at an
// existing server instead (tests that stop the server then start one of their own).

/** The folder holding initdb and postgres: on PATH, or where Debian's package puts them. */
function binDir(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir && existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'postgres'))) return dir;
  }
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length ? join(root, versions[0], 'bin') : undefined;
}

/**
 * Whether the PostgreSQL suites can run: PG_URL points at a server, or the binaries exist. Without
 * either they are skipped loudly, unless REQUIRE_POSTGRES=1 (CI), where that is a failure.
 */
export function postgresAvailable(suite: string): boolean {
  if (process.env.PG_URL || binDir()) return true;
  const message = `${suite}: no PostgreSQL binaries (initdb, postgres) and no PG_URL`;
  if (process.env.REQUIRE_POSTGRES === '1') throw new Error(`${message}, but REQUIRE_POSTGRES=1`);
  process.stderr.write(`\n!!! SKIPPING ${message} (install postgresql or set PG_URL) !!!\n\n`);
  return false;
}

/** initdb refuses to run as root: then the server runs as the `postgres` user. */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

/** A private PostgreSQL server on a loopback port. */
export class PostgresServer {
  private child: ChildProcess | undefined;
  private constructor(
    readonly port: number,
    private readonly dir: string | undefined,
  ) {}

  /** The postmaster's PID while this server runs it (the bench reads the CPU time of its processes). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** A connection string for the `postgres` database as the `postgres` superuser. */
  get url(): string {
    return this.dir ? `postgres://postgres@127.0.0.1:${this.port}/postgres` : process.env.PG_URL!;
  }

  /** Starts one (or uses PG_URL unless `ownServer`: a test that stops the server needs its own). */
  static async start(options: { ownServer?: boolean } = {}): Promise<PostgresServer> {
    if (process.env.PG_URL && !options.ownServer) return new PostgresServer(0, undefined);
    const bin = binDir();
    if (!bin) throw new Error('no PostgreSQL binaries: install postgresql or set PG_URL');
    const user = serverUser();
    const dir = mkdtempSync(join(tmpdir(), 'idem-pg-'));
    const data = join(dir, 'data');
    mkdirSync(data, { mode: 0o700 });
    if (user) {
      chownSync(dir, user.uid, user.gid);
      chownSync(data, user.uid, user.gid);
    }
    execFileSync(
      join(bin, 'initdb'),
      ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--no-instructions'],
      {
        stdio: 'ignore',
        ...user,
      },
    );
    try {
      return await startRetried(async () => new PostgresServer(await freePort(), dir));
    } catch (error) {
      rmSync(dir, { recursive: true, force: true });
      throw error;
    }
  }

  /** (Re)starts the server on the same port and data folder. */
  async resume(): Promise<void> {
    if (!this.dir) throw new Error('cannot restart the PG_URL server');
    const settings = [
      'fsync=off',
      'synchronous_commit=off',
      'full_page_writes=off',
      'max_connections=200',
      'log_min_messages=fatal',
    ];
    this.child = track(
      spawn(
        join(binDir()!, 'postgres'),
        [
          '-D',
          join(this.dir, 'data'),
          '-p',
          String(this.port),
          '-h',
          '127.0.0.1',
          '-k',
          this.dir,
          ...settings.flatMap((s) => ['-c', s]),
        ],
        { stdio: 'ignore', ...serverUser() },
      ),
    );
    await this.waitUntilReady();
  }

  /** Ends the server by PID (a fast shutdown, then SIGKILL if it lingers) and waits for it to exit. */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGINT');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }

  /** Stops the server and removes its data folder. */
  async destroy(): Promise<void> {
    await this.stop();
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }

  /** Runs one statement on a connection of its own (to `url`, by default the `postgres` database). */
  async query<T extends pg.QueryResultRow = pg.QueryResultRow>(
    text: string,
    values: unknown[] = [],
    url = this.url,
  ): Promise<T[]> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return (await client.query<T>(text, values)).rows;
    } finally {
      await client.end();
    }
  }

  /** A database of its own for one suite, so suites sharing a PG_URL server never meet. */
  async createDatabase(name: string): Promise<string> {
    await this.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await this.query(`CREATE DATABASE "${name}"`);
    const url = new URL(this.url);
    url.pathname = `/${name}`;
    return url.toString();
  }

  private async waitUntilReady(): Promise<void> {
    for (let i = 0; i < 200; i++) {
      if (this.child && this.child.exitCode !== null)
        throw new Error(`postgres on ${this.port} exited with ${this.child.exitCode}`);
      try {
        await this.query('SELECT 1');
        return;
      } catch {
        await sleep(50);
      }
    }
    throw new Error(`postgres on ${this.port} did not accept connections within 10 s`);
  }
}
