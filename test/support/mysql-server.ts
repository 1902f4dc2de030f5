import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { track } from './processes.js';
import { freePort, startRetried } from './ports.js';
import { sleep } from './timing.js';

// A throwaway MariaDB server for the tests, like the PostgreSQL one: mariadb-install-db into a
// temporary folder, the server on a free loopback port with durability off, stopped by PID.
// MYSQL_URL points the suites at an existing server (a MySQL 8, say) instead.

const SERVER = '/usr/sbin/mariadbd';
const INSTALL = '/usr/bin/mariadb-install-db';

/**
 * Whether the MySQL suites can run: MYSQL_URL points at a server, or MariaDB's binaries exist.
 * Without either they are skipped loudly, unless REQUIRE_MYSQL=1 (CI), where that is a failure.
 */
export function mysqlAvailable(suite: string): boolean {
  if (process.env.MYSQL_URL || (existsSync(SERVER) && existsSync(INSTALL))) return true;
  const message = `${suite}: no MariaDB binaries (mariadbd, mariadb-install-db) and no MYSQL_URL`;
  if (process.env.REQUIRE_MYSQL === '1') throw new Error(`${message}, but REQUIRE_MYSQL=1`);
  process.stderr.write(`\n!!! SKIPPING ${message} (install mariadb-server or set MYSQL_URL) !!!\n\n`);
  return false;
}

/** mariadbd refuses to run as root unless told a user: then it runs as `mysql`, which owns the folder. */
function serverUser(): string | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'mysql'], { encoding: 'utf8' }).trim());
  return `${id('-u')}:${id('-g')}`;
}

/** A private MariaDB server on a loopback port. */
export class MySqlServer {
  private child: ChildProcess | undefined;
  private constructor(
    readonly port: number,
    private readonly dir: string | undefined,
  ) {}

  /** The server's PID while this object runs it (the bench reads its CPU time). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** A URI as `root` with no database chosen (or MYSQL_URL). */
  get url(): string {
    return this.dir ? `mysql://root@127.0.0.1:${this.port}/` : process.env.MYSQL_URL!;
  }

  /** Starts one (or uses MYSQL_URL unless `ownServer`: a test that stops the server needs its own). */
  static async start(options: { ownServer?: boolean } = {}): Promise<MySqlServer> {
    if (process.env.MYSQL_URL && !options.ownServer) return new MySqlServer(0, undefined);
    if (!existsSync(SERVER)) throw new Error('no MariaDB binaries: install mariadb-server or set MYSQL_URL');
    const dir = mkdtempSync(join(tmpdir(), 'idem-mysql-'));
    const data = join(dir, 'data');
    mkdirSync(data, { mode: 0o700 });
    // A temporary folder of its own: installs running at once in the shared /tmp collide on the
    // bootstrap's temporary tables, and one of them fails ("Unknown table 'mysql.tmp_user_sys'").
    const tmp = join(dir, 'tmp');
    mkdirSync(tmp, { mode: 0o700 });
    const user = serverUser();
    if (user) {
      const [uid, gid] = user.split(':').map(Number);
      for (const folder of [dir, data, tmp]) chownSync(folder, uid, gid);
    }
    execFileSync(
      INSTALL,
      [
        '--no-defaults',
        `--datadir=${data}`,
        `--tmpdir=${tmp}`,
        '--auth-root-authentication-method=normal',
        '--skip-test-db',
        ...(user ? ['--user=mysql'] : []),
      ],
      // What it printed goes into the error when it fails.
      { stdio: 'pipe' },
    );
    try {
      return await startRetried(async () => new MySqlServer(await freePort(), dir));
    } catch (error) {
      rmSync(dir, { recursive: true, force: true });
      throw error;
    }
  }

  /** (Re)starts the server on the same port and data folder. */
  async resume(): Promise<void> {
    if (!this.dir) throw new Error('cannot restart the MYSQL_URL server');
    this.child = track(
      spawn(
        SERVER,
        [
          '--no-defaults',
          `--datadir=${join(this.dir, 'data')}`,
          `--tmpdir=${join(this.dir, 'tmp')}`,
          `--port=${this.port}`,
          '--bind-address=127.0.0.1',
          `--socket=${join(this.dir, 'sock')}`,
          `--pid-file=${join(this.dir, 'pid')}`,
          '--skip-log-bin',
          '--skip-name-resolve',
          '--innodb-flush-log-at-trx-commit=0',
          '--innodb-doublewrite=0',
          '--innodb-buffer-pool-size=64M',
          '--max-connections=300',
          '--max-allowed-packet=64M',
          '--log-error=' + join(this.dir, 'error.log'),
          ...(serverUser() ? ['--user=mysql'] : []),
        ],
        { stdio: 'ignore' },
      ),
    );
    await this.waitUntilReady();
  }

  /** Ends the server by PID (SIGTERM, a clean shutdown, then SIGKILL if it lingers) and waits for it. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }

  /** Stops the server and removes its data folder. */
  async destroy(): Promise<void> {
    await this.stop();
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }

  /** Runs one statement on a connection of its own (to `url`, by default no database). */
  async query<T = Record<string, unknown>>(sql: string, values: unknown[] = [], url = this.url): Promise<T[]> {
    const connection = await mysql.createConnection({ uri: url });
    try {
      const [rows] = await connection.query(sql, values);
      return rows as T[];
    } finally {
      await connection.end();
    }
  }

  /** A database of its own for one suite, so suites sharing a MYSQL_URL server never meet. */
  async createDatabase(name: string): Promise<string> {
    await this.query(`DROP DATABASE IF EXISTS \`${name}\``);
    await this.query(`CREATE DATABASE \`${name}\``);
    const url = new URL(this.url);
    url.pathname = `/${name}`;
    return url.toString();
  }

  private async waitUntilReady(): Promise<void> {
    for (let i = 0; i < 600; i++) {
      if (this.child && this.child.exitCode !== null)
        throw new Error(`mariadbd on ${this.port} exited with ${this.child.exitCode}`);
      try {
        await this.query('SELECT 1');
        return;
      } catch {
        await sleep(50);
      }
    }
    throw new Error(`mariadbd on ${this.port} did not accept connections within 30 s`);
  }
}
