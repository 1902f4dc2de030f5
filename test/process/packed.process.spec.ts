import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { promisify, stripVTControlCharacters } from 'node:util';
import { guideFiles, quickStart } from '../support/guide-blocks.js';
import { MySqlServer, mysqlAvailable } from '../support/mysql-server.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { RedisServer, redisAvailable } from '../support/redis-server.js';

// The package as a user gets it: `npm pack`'s tarball, installed by npm itself into fresh apps in a
// temporary folder outside this repository (so nothing resolves to lib/ or dist/ by accident), beside
// Nest, TypeORM and pg, once with ioredis 5 and once with ioredis 6 and the README's override. npm
// installs from its cache (`npm ci` filled it), so this takes seconds. Only the tools an app develops
// with (TypeScript's types, jest, vitest, supertest, better-sqlite3's built binary) come from this
// repository's node_modules, linked one folder up, where Node and TypeScript look last.

const ROOT = resolve('.');
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');
/** TypeScript 7 (the native compiler, npm's default now), installed beside 6 under an alias. */
const TSC7 = join(ROOT, 'node_modules/typescript7/bin/tsc');
const VITEST = join(ROOT, 'node_modules/vitest/vitest.mjs');
const execFileAsync = promisify(execFile);
const withRedis = redisAvailable('packed tarball: the Redis recipe');
const withPostgres = postgresAvailable('packed tarball: the store contract on PostgresStore');
const withMySql = mysqlAvailable('packed tarball: the store contract on MySqlStore');

const LOCKED = (
  JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version: string }> }
).packages;
/** The version this repository's tests run, so that npm finds it in its cache. */
const locked = (name: string): string => LOCKED[`node_modules/${name}`].version;

/** The stores guide's answer to npm's ERESOLVE with ioredis 6 beside TypeORM, as JSON. */
function readmeOverrides(): Record<string, unknown> {
  const readme = readFileSync(join(ROOT, 'docs/guides/stores.md'), 'utf8');
  return JSON.parse(`{${/`("overrides": \{.+?\} \})`/.exec(readme)![1]}}`).overrides as Record<string, unknown>;
}

/**
 * `npm install` of the tarball and an app's runtime dependencies (and `extra`) into `folder`, with
 * the ioredis major given. No install scripts: nothing here builds native code (SQLite's binding is linked).
 */
async function install(folder: string, tarball: string, ioredis: '5' | '6', extra: readonly string[] = []): Promise<void> {
  mkdirSync(folder, { recursive: true });
  const dependencies = {
    'nestjs-idempotency': `file:${tarball}`,
    ...Object.fromEntries(
      [
        '@nestjs/common',
        '@nestjs/core',
        '@nestjs/platform-express',
        '@nestjs/testing',
        '@nestjs/typeorm',
        'typeorm',
        'pg',
        'mysql2',
        'reflect-metadata',
        'rxjs',
        ...extra,
      ].map((name) => [name, locked(name)]),
    ),
    ioredis: locked(ioredis === '5' ? 'ioredis5' : 'ioredis'),
  };
  const overrides = ioredis === '6' ? readmeOverrides() : {};
  writeFileSync(
    join(folder, 'package.json'),
    JSON.stringify({ name: `app-ioredis${ioredis}`, private: true, dependencies, overrides }),
  );
  await execFileAsync('npm', ['install', '--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: folder,
    encoding: 'utf8',
    timeout: 300_000,
  });
}

/** What the guides' code imports beside Nest, TypeORM and ioredis (the types of Node and jest come from above). */
const GUIDE_PACKAGES = [
  '@nestjs/platform-fastify',
  '@nestjs/microservices',
  '@nestjs/graphql',
  'graphql',
  '@nestjs/apollo',
  '@apollo/server',
  '@as-integrations/express5',
  '@nestjs/mercurius',
  'mercurius',
  'fastify',
  '@nestjs/terminus',
  '@nestjs/config',
  'nestjs-cls',
  '@nestjs-cls/transactional',
  '@nestjs-cls/transactional-adapter-typeorm',
  'supertest',
];

/** A `nest new`-like tsconfig.json for `app` in the module system of its kind. */
function writeTsconfig(app: string, kind: keyof typeof KINDS, include: string[], skipLibCheck: boolean): void {
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        ...KINDS[kind].compilerOptions,
        target: 'ES2023',
        strict: true,
        experimentalDecorators: true,
        emitDecoratorMetadata: true,
        skipLibCheck,
        types: ['node'],
        outDir: 'dist',
      },
      include,
    }),
  );
}

/** TypeScript's diagnostics for the project in `app` ('' when it compiles), with the compiler given. */
function compile(tsc: string, app: string, ...flags: string[]): string {
  try {
    execFileSync(process.execPath, [tsc, '-p', app, ...flags], { encoding: 'utf8' });
    return '';
  } catch (err) {
    return String((err as { stdout?: string }).stdout);
  }
}

/**
 * Starts `dist/<main>` of `app` as the README says (`PORT` from the environment, 0 here so that the
 * system picks a free one), sends the quick start's request and its retry, and stops it. A preloaded
 * hook reports the port the server listens on, as the app itself does not print it.
 */
async function quickStartRun(app: string, main: string, reporter: string): Promise<unknown[]> {
  const child = spawn(process.execPath, ['--require', reporter, join(app, 'dist', main)], {
    cwd: app,
    env: { ...process.env, PORT: '0' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = once(child, 'exit');
  try {
    let stderr = '';
    const port = await new Promise<number>((found, failed) => {
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        const m = /^listening (\d+)$/m.exec(stderr);
        if (m) found(Number(m[1]));
      });
      void exited.then(() => failed(new Error(`the app exited before it listened: ${stderr}`)));
    });
    const answers: unknown[] = [];
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`http://127.0.0.1:${port}/payments`, {
        method: 'POST',
        headers: { 'idempotency-key': 'order-1', 'content-type': 'application/json' },
        body: '{"amount":1000,"currency":"EUR"}',
      });
      answers.push({ status: res.status, replayed: res.headers.get('idempotent-replayed'), body: await res.text() });
    }
    return answers;
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

/** A payments app in the quick start's shape, the Redis recipe switched by REDIS_URL, and a bootstrap that sends one request and its retry. */
const MAIN = `import { Body, Controller, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import { Idempotent, IdempotencyModule, RedisStore } from 'nestjs-idempotency';

let charges = 0;

@Controller('payments')
class PaymentsController {
  @Post()
  @Idempotent()
  create(@Body() body: { amount: number }) {
    charges++;
    return { id: \`pay_\${charges}\`, amount: body.amount };
  }
}

// The README's Redis recipe when REDIS_URL is set: a client of the store's own (withUrl, loaded by the
// package) or the app's (withClient); the in-memory default otherwise.
const url = process.env.REDIS_URL;
const client = url !== undefined && process.env.REDIS_CLIENT === 'app' ? new Redis(url) : undefined;
const cache =
  url === undefined
    ? undefined
    : new RedisStore(client ? { client } : { url });

@Module({ imports: [IdempotencyModule.forRoot({ store: cache })], controllers: [PaymentsController] })
class AppModule {}

async function main(): Promise<void> {
  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  const send = async () => {
    const res = await fetch(\`http://127.0.0.1:\${port}/payments\`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': process.env.KEY ?? 'order-1' },
      body: JSON.stringify({ amount: 5 }),
    });
    return { status: res.status, replayed: res.headers.get('idempotent-replayed'), body: await res.text() };
  };
  const first = await send();
  const retry = await send();
  await app.close();
  client?.disconnect();
  console.log(JSON.stringify({ first, retry, charges }));
}
void main();
`;

/** The two project kinds `nest new` users have: the classic CommonJS layout, and ESM. */
const KINDS = {
  commonjs: { packageJson: { name: 'app-cjs', private: true }, compilerOptions: { module: 'commonjs' } },
  esm: { packageJson: { name: 'app-esm', private: true, type: 'module' }, compilerOptions: { module: 'nodenext' } },
} as const;

/** The testing guide's set-up and example, taken from the guide itself. */
function testingRecipe(): { script: string; jestConfig: string; spec: string } {
  const section = readFileSync(join(ROOT, 'docs/guides/testing.md'), 'utf8');
  const block = (lang: string) => new RegExp(`^\`\`\`${lang}\n([\\s\\S]*?)^\`\`\`$`, 'm').exec(section)![1];
  const script = /"test": "([^"]+)"/.exec(block('sh'))![1];
  return { script, jestConfig: block('js'), spec: block('ts') };
}

/** The flags of the custom-stores guide's vitest line for the contract suite (`vitest run <flags>`). */
function readmeVitestFlags(): string[] {
  const readme = readFileSync(join(ROOT, 'docs/guides/custom-stores.md'), 'utf8');
  return /`vitest run ([^`]+)`/.exec(readme)![1].split(' ');
}

/** The custom-stores guide's example store (`MapStore`). */
function readmeMapStore(): string {
  const readme = readFileSync(join(ROOT, 'docs/guides/custom-stores.md'), 'utf8');
  return [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)]
    .map((m) => m[1])
    .find((code) => code.includes('export class MapStore'))!;
}

describe('the packed tarball, installed by npm in fresh apps', () => {
  let dir: string;
  let tarball: string;
  let files: string[];
  let redis: RedisServer | undefined;
  let postgres: PostgresServer | undefined;
  let mysql: MySqlServer | undefined;

  beforeAll(async () => {
    if (withRedis) redis = await RedisServer.start();
    if (withPostgres) postgres = await PostgresServer.start();
    if (withMySql) mysql = await MySqlServer.start();
    dir = mkdtempSync(join(tmpdir(), 'idem-packed-'));
    // prepack builds dist/ from scratch: what is packed is what the sources make now. In a copy of
    // what it reads, so that the suites running beside this one keep the repository's dist/.
    const stage = join(dir, 'stage');
    const { files: shipped } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { files: string[] };
    const inputs = ['package.json', 'README.md', 'LICENSE', 'tsconfig.json', 'tsconfig.build.json', 'lib', ...shipped];
    for (const input of inputs.filter((name) => name !== 'dist'))
      cpSync(join(ROOT, input), join(stage, input), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules'), join(stage, 'node_modules'), 'dir');
    const [packed] = JSON.parse(
      execFileSync('npm', ['pack', '--json', '--pack-destination', dir], {
        cwd: stage,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }),
    ) as { filename: string; files: { path: string }[] }[];
    tarball = join(dir, packed.filename);
    files = packed.files.map((f) => f.path);
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
    // ioredis 5 first (beside it, an app with every package the guides import); ioredis 6 as a user
    // switches: the same install, the override, npm install again.
    await Promise.all([install(join(dir, 'ioredis5'), tarball, '5'), install(join(dir, 'guides'), tarball, '5', GUIDE_PACKAGES)]);
    execFileSync('cp', ['-r', join(dir, 'ioredis5'), join(dir, 'ioredis6')]);
    await install(join(dir, 'ioredis6'), tarball, '6');
  }, 360_000);
  afterAll(async () => {
    await redis?.stop();
    await postgres?.destroy();
    await mysql?.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  it('holds the compiled package and its documents, and nothing else', () => {
    expect(files).toEqual(
      expect.arrayContaining([
        'package.json',
        'README.md',
        'LICENSE',
        'CHANGELOG.md',
        'dist/index.js',
        'dist/index.d.ts',
        'sql/postgres/001_idempotency_records.sql',
        'sql/postgres/002_idempotency_phases.sql',
        'sql/sqlite/001_idempotency_records.sql',
        'sql/mysql/001_idempotency_records.sql',
      ]),
    );
    // No source maps: they would point at lib/*.ts, which is not shipped.
    expect(
      files.filter(
        (f) =>
          !/^dist\/.+\.(js|d\.ts)$/.test(f) &&
          !/^sql\/(postgres|sqlite|mysql)\/\d{3}_\w+\.sql$/.test(f) &&
          !['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md'].includes(f),
      ),
    ).toEqual([]);
  });

  it.each(Object.keys(KINDS) as (keyof typeof KINDS)[])(
    'a %s app compiles against it on TypeScript 6 and 7 and runs a payments app on the default store, the Redis recipe on ioredis 5 and 6, the testing guide, and the store contract under node:test and vitest',
    async (kind) => {
      const app = join(dir, 'ioredis5', kind);
      const modules = join(app, 'node_modules');
      const installed = join(dir, 'ioredis5', 'node_modules', 'nestjs-idempotency');
      mkdirSync(modules, { recursive: true });
      writeFileSync(join(app, 'package.json'), JSON.stringify(KINDS[kind].packageJson));
      // npm unpacked the tarball (a copy, not a link to this repository), and the migrations are
      // reachable by the package's name, as the README's recipes load them.
      expect(lstatSync(installed).isSymbolicLink()).toBe(false);
      expect(createRequire(join(app, 'main.js')).resolve('nestjs-idempotency/sql/postgres/001_idempotency_records.sql')).toBe(
        join(installed, 'sql', 'postgres', '001_idempotency_records.sql'),
      );
      writeTsconfig(app, kind, ['main.ts', 'map-store.ts'], true);
      writeFileSync(join(app, 'main.ts'), MAIN);
      writeFileSync(join(app, 'map-store.ts'), readmeMapStore());
      // Under TypeScript 6 (which emits what runs below) and 7, the package's declarations checked too.
      expect(compile(TSC7, app, '--skipLibCheck', 'false', '--noEmit')).toBe('');
      expect(compile(TSC, app, '--skipLibCheck', 'false')).toBe('');

      const run = async (folder: string, env: Record<string, string>) => {
        const { stdout } = await execFileAsync(process.execPath, [join(folder, 'dist', 'main.js')], {
          cwd: folder,
          encoding: 'utf8',
          timeout: 60_000,
          env: { ...process.env, ...env },
        });
        return JSON.parse(stdout.trim().split('\n').pop()!) as unknown;
      };
      const replayed = {
        first: { status: 201, replayed: null, body: '{"id":"pay_1","amount":5}' },
        retry: { status: 201, replayed: 'true', body: '{"id":"pay_1","amount":5}' },
        charges: 1,
      };
      expect(await run(app, {})).toEqual(replayed);

      // The shipped store contract under node:test, loaded by the package's name (import or require):
      // InMemoryStore and the README's MapStore (compiled with the app) in both kinds; the durable
      // stores in the ESM app, each in a file of its own, against the servers of this suite.
      const load =
        kind === 'esm'
          ? (names: string, from: string) => `import { ${names} } from '${from}';\n`
          : (names: string, from: string) => `const { ${names} } = require('${from}');\n`;
      const head = load('describe, it', 'node:test') + load('storeContract', 'nestjs-idempotency/testing');
      const contracts: Record<string, string> = {
        'memory.test.js':
          head +
          load('InMemoryStore', 'nestjs-idempotency') +
          load('MapStore', './dist/map-store.js') +
          "storeContract({ describe, it }, () => new InMemoryStore(), { name: 'InMemoryStore' });\n" +
          "storeContract({ describe, it }, () => new MapStore(), { name: 'MapStore', without: ['ping', 'peek', 'forget', 'renewAll'] });\n",
      };
      if (kind === 'esm') {
        const close = 'close: (store) => store.close()';
        contracts['sqlite.test.js'] =
          head +
          load('SqliteStore', 'nestjs-idempotency') +
          `storeContract({ describe, it }, () => new SqliteStore({ filename: ${JSON.stringify(join(app, 'contract.db'))} }), { name: 'SqliteStore', ${close} });\n`;
        if (redis)
          contracts['redis.test.js'] =
            head +
            load('RedisStore', 'nestjs-idempotency') +
            `storeContract({ describe, it }, () => new RedisStore({ url: ${JSON.stringify(redis.url)} }), { name: 'RedisStore', ${close} });\n`;
        if (postgres)
          contracts['postgres.test.js'] =
            head +
            load('PostgresStore', 'nestjs-idempotency') +
            `storeContract({ describe, it }, () => new PostgresStore({ connectionString: ${JSON.stringify(await postgres.createDatabase('packed'))} }), { name: 'PostgresStore', ${close} });\n`;
        if (mysql)
          contracts['mysql.test.js'] =
            head +
            load('MySqlStore', 'nestjs-idempotency') +
            `storeContract({ describe, it }, () => new MySqlStore({ uri: ${JSON.stringify(await mysql.createDatabase('packed'))} }), { name: 'MySqlStore', ${close} });\n`;
      }
      for (const [file, text] of Object.entries(contracts)) writeFileSync(join(app, file), text);
      const contractRun = await execFileAsync(process.execPath, ['--test', ...Object.keys(contracts)], {
        cwd: app,
        encoding: 'utf8',
        timeout: 180_000,
      }).then(
        ({ stdout }) => stdout,
        (err: { stdout?: string; message: string }) => `failed: ${err.stdout ?? err.message}`,
      );
      expect(contractRun).toMatch(/^# fail 0$/m);
      const suites = ['InMemoryStore', 'MapStore', ...(kind === 'esm' ? ['SqliteStore'] : [])];
      if (kind === 'esm' && redis) suites.push('RedisStore');
      if (kind === 'esm' && postgres) suites.push('PostgresStore');
      if (kind === 'esm' && mysql) suites.push('MySqlStore');
      for (const name of suites) expect(contractRun).toContain(`store contract: ${name}`);
      // A store that failed to open cancels its tests rather than failing them.
      expect(contractRun).toMatch(/^# cancelled 0$/m);
      expect(Number(/^# pass (\d+)$/m.exec(contractRun)?.[1])).toBeGreaterThanOrEqual(25 + 15 * (suites.length - 2));

      // The same under vitest, as the README says: its describe and it, its run with a 30 s test timeout.
      writeFileSync(
        join(app, 'contract.vitest.test.mjs'),
        "import { describe, it } from 'vitest';\nimport { InMemoryStore } from 'nestjs-idempotency';\n" +
          "import { storeContract } from 'nestjs-idempotency/testing';\n" +
          "storeContract({ describe, it }, () => new InMemoryStore(), { name: 'InMemoryStore under vitest' });\n",
      );
      const vitestRun = await execFileAsync(
        process.execPath,
        [VITEST, 'run', 'contract.vitest', ...readmeVitestFlags(), '--reporter=verbose', '--color=false'],
        { cwd: app, encoding: 'utf8', timeout: 120_000, env: { ...process.env, CI: '1' } },
      ).then(
        // vitest colours its summary even when told not to if FORCE_COLOR is inherited.
        ({ stdout }) => stripVTControlCharacters(stdout),
        (err: { stdout?: string; message: string }) => `failed: ${stripVTControlCharacters(err.stdout ?? err.message)}`,
      );
      expect(vitestRun).toMatch(/store contract: InMemoryStore under vitest/);
      expect(Number(/Tests +(\d+) passed/.exec(vitestRun)?.[1])).toBeGreaterThanOrEqual(15);
      expect(vitestRun).not.toMatch(/failed/i);

      // The README's testing recipe, word for word: its jest config, its script, its spec file.
      const recipe = testingRecipe();
      writeFileSync(join(app, 'package.json'), JSON.stringify({ ...KINDS[kind].packageJson, scripts: { test: recipe.script } }));
      writeFileSync(join(app, 'jest.config.mjs'), recipe.jestConfig);
      writeFileSync(join(app, 'orders.spec.ts'), recipe.spec);
      symlinkSync(join(ROOT, 'node_modules', 'jest'), join(modules, 'jest'), 'dir');
      const tested = await execFileAsync('npm', ['test', '--', '--ci'], { cwd: app, encoding: 'utf8', timeout: 120_000 }).then(
        ({ stderr }) => stderr,
        (err: { stderr?: string; message: string }) => `failed: ${err.stderr ?? err.message}`,
      );
      expect(tested).toMatch(/^Tests: +2 passed, 2 total$/m);

      // The Redis recipe on the install's own ioredis (the package's dynamic import finds it), with the
      // store's client (withUrl) and the app's (withClient): ioredis 5, then the same app under ioredis 6.
      if (!redis) return;
      for (const major of ['5', '6']) {
        const folder = join(dir, `ioredis${major}`, kind);
        if (folder !== app) {
          mkdirSync(folder, { recursive: true });
          writeFileSync(join(folder, 'package.json'), JSON.stringify(KINDS[kind].packageJson));
          execFileSync('cp', ['-r', join(app, 'dist'), folder]);
        }
        expect(
          JSON.parse(readFileSync(join(dir, `ioredis${major}`, 'node_modules', 'ioredis', 'package.json'), 'utf8')).version,
        ).toMatch(new RegExp(`^${major}\\.`));
        for (const client of ['store', 'app']) {
          expect(await run(folder, { REDIS_URL: redis.url, REDIS_CLIENT: client, KEY: `${kind}-${major}-${client}` })).toEqual(
            replayed,
          );
        }
      }
    },
    240_000,
  );

  it.each(Object.keys(KINDS) as (keyof typeof KINDS)[])(
    "a %s app compiles the README's and every guide's code word for word on TypeScript 6 and 7, and the quick start replays on Express and on Fastify",
    async (kind) => {
      const reporter = join(dir, 'report-port.cjs');
      writeFileSync(
        reporter,
        "const net = require('node:net');\nconst listen = net.Server.prototype.listen;\n" +
          'net.Server.prototype.listen = function (...args) {\n' +
          "  this.once('listening', () => process.stderr.write(`listening ${this.address().port}\\n`));\n" +
          '  return listen.apply(this, args);\n};\n',
      );
      // Every complete block of the README and the guides in one project of this kind, the quick start's
      // module and its two main.ts among them. A CommonJS app has no import.meta: the migrations guide
      // says what it writes instead.
      const app = join(dir, 'guides', kind);
      mkdirSync(app);
      writeFileSync(join(app, 'package.json'), JSON.stringify(KINDS[kind].packageJson));
      const files = [...guideFiles()].filter(([, code]) => kind === 'esm' || !code.includes('import.meta'));
      expect(files.length).toBeGreaterThanOrEqual(25);
      for (const [name, code] of files) writeFileSync(join(app, name), code);
      writeTsconfig(app, kind, ['*.ts'], true);
      expect(compile(TSC7, app, '--noEmit')).toBe('');
      expect(compile(TSC, app)).toBe('');

      // The quick start's main.ts on Express and on Fastify, started as they are: both replay.
      const { appModule, express, fastify } = quickStart();
      expect(files).toContainEqual(['app.module.ts', appModule]);
      const body = '{"id":"pay_order-1","amount":1000,"currency":"EUR"}';
      for (const main of [express, fastify]) {
        const [name] = files.find(([, code]) => code === main)!;
        expect(await quickStartRun(app, name.replace(/\.ts$/, '.js'), reporter)).toEqual([
          { status: 201, replayed: null, body },
          { status: 201, replayed: 'true', body },
        ]);
      }
    },
    240_000,
  );
});
