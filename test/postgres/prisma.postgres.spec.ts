import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { built } from '../support/build.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { track } from '../support/processes.js';
import { sleep } from '../support/timing.js';

// docs/guides/exactly-once.md's Prisma line, run: a Prisma 7 client (driver adapter on pg) behind
// @nestjs-cls/transactional-adapter-prisma, the completion committed by `$queryRawUnsafe` in the
// handler's interactive transaction. The app is test/support/prisma-app.ts, in a process of its own.
const describePg = postgresAvailable('Prisma exactly-once suite') ? describe : describe.skip;

built('.build');

let server: PostgresServer;
let url: string;
let output: string;

/** Generates a Prisma client for the Payment table into a folder under the repository. */
function generateClient(): string {
  // Under the repository, so that the client resolves @prisma/client's runtime from node_modules.
  const dir = resolve('.build', `prisma-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  const schema = join(dir, 'schema.prisma');
  writeFileSync(
    schema,
    `generator client {\n  provider = "prisma-client-js"\n  output = "${join(dir, 'client')}"\n}\n` +
      'datasource db {\n  provider = "postgresql"\n}\n' +
      'model Payment {\n  id Int @id @default(autoincrement())\n  key String\n  amount Int\n}\n',
  );
  // Prisma 7 generates the client in WebAssembly, but its CLI insists on a schema-engine binary and
  // downloads one when it is missing, which a machine without internet access cannot. Generation
  // never runs it, so any executable will do.
  execFileSync(
    process.execPath,
    [createRequire(import.meta.url).resolve('prisma/build/index.js'), 'generate', '--schema', schema],
    {
      cwd: dir,
      stdio: 'pipe',
      env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: process.execPath, PRISMA_HIDE_UPDATE_MESSAGE: '1' },
    },
  );
  return dir;
}

/** Starts the Prisma app on `adapter` and returns it with its base URL. */
async function startApp(adapter: string): Promise<{ child: ChildProcess; base: string }> {
  const child = track(
    spawn(process.execPath, ['.build/test/support/prisma-app.js'], {
      env: { ...process.env, DATABASE_URL: url, PRISMA_CLIENT: join(output, 'client'), ADAPTER: adapter },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let said = '';
  child.stdout.on('data', (d) => (said += String(d)));
  child.stderr.on('data', (d) => (said += String(d)));
  for (let i = 0; i < 1200; i++) {
    const base = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(said)?.[1];
    if (base) return { child, base };
    if (child.exitCode !== null) break;
    await sleep(50);
  }
  child.kill('SIGKILL');
  throw new Error(`the Prisma app did not start: ${said}`);
}

async function pay(
  base: string,
  key: string,
  decline = false,
): Promise<{ status: number; text: string; replayed: string | null }> {
  const res = await fetch(`${base}/payments`, {
    method: 'POST',
    headers: { 'idempotency-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ amount: 100, decline }),
  });
  return { status: res.status, text: await res.text(), replayed: res.headers.get('idempotent-replayed') };
}

async function count(sql: string, key: string): Promise<number> {
  return (await server.query<{ n: number }>(sql, [key], url))[0].n;
}
const payments = (key: string) => count('SELECT count(*)::int AS n FROM "Payment" WHERE key = $1', key);
const records = (key: string) => count('SELECT count(*)::int AS n FROM idempotency_records WHERE key LIKE $1', `%:${key}`);

describePg('Prisma: @Idempotent({ transactional: true }) through $queryRawUnsafe in the cls transaction', () => {
  beforeAll(async () => {
    server = await PostgresServer.start();
    url = await server.createDatabase(`prisma_${process.pid}`);
    await server.query('CREATE TABLE "Payment" (id serial PRIMARY KEY, key text NOT NULL, amount integer NOT NULL)', [], url);
    output = generateClient();
  }, 120_000);

  afterAll(async () => {
    await server?.destroy();
    if (output) rmSync(output, { recursive: true, force: true });
  });

  describe.each(['express', 'fastify'])('%s', (adapter) => {
    let app: { child: ChildProcess; base: string };
    const key = (name: string) => `${adapter}-${name}`;

    beforeAll(async () => {
      app = await startApp(adapter);
    }, 60_000);
    afterAll(async () => {
      if (!app || app.child.exitCode !== null) return;
      const exited = new Promise((r) => app.child.once('exit', r));
      app.child.kill('SIGTERM');
      await exited;
    });

    it('a payment and its record commit together; five retries replay it byte for byte and write nothing', async () => {
      const first = await pay(app.base, key('paid'));
      expect(first.status).toBe(201);
      expect(first.replayed).toBeNull();
      expect(await records(key('paid'))).toBe(1);
      for (let i = 0; i < 5; i++) {
        expect(await pay(app.base, key('paid'))).toEqual({ status: 201, text: first.text, replayed: 'true' });
      }
      expect(await payments(key('paid'))).toBe(1);
    });

    it('a decline thrown after the payment rolls both back: no row, no record, and the retry runs', async () => {
      expect((await pay(app.base, key('declined'), true)).status).toBe(400);
      expect(await payments(key('declined'))).toBe(0);
      expect(await records(key('declined'))).toBe(0);
      const retry = await pay(app.base, key('declined'));
      expect(retry.status).toBe(201);
      expect(retry.replayed).toBeNull();
      expect(await payments(key('declined'))).toBe(1);
    });
  });
});
