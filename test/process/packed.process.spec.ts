import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { RedisServer, redisAvailable } from '../support/redis-server.js';

// The package as a user gets it: `npm pack`'s tarball, unpacked into the node_modules of a fresh app
// in a temporary folder outside this repository (so nothing resolves to lib/ or dist/ by accident).
// The app's other dependencies (Nest, TypeScript's types) come from this repository's node_modules,
// linked one folder up, where Node and TypeScript look after the app's own node_modules.

const ROOT = resolve('.');
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');
const execFileAsync = promisify(execFile);
const withRedis = redisAvailable('packed tarball: the Redis recipe');

/** The quick start of the README, plus a bootstrap that sends one request and its retry. */
const MAIN = `import { Body, Controller, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import { Idempotent, IdempotencyModule, RedisCache, RedisCacheOptions } from 'nestjs-idempotency';

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
    : new RedisCache(client ? RedisCacheOptions.create().withClient(client) : RedisCacheOptions.create().withUrl(url));

@Module({ imports: [IdempotencyModule.forRoot({ cache })], controllers: [PaymentsController] })
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

/** The README's "Testing your app" set-up and example, taken from the README itself. */
function testingRecipe(): { script: string; jestConfig: string; spec: string } {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('### Testing your app with the module'));
  const block = (lang: string) => new RegExp(`^\`\`\`${lang}\n([\\s\\S]*?)^\`\`\`$`, 'm').exec(section)![1];
  const script = /"test": "([^"]+)"/.exec(block('sh'))![1];
  return { script, jestConfig: block('js'), spec: block('ts') };
}

/** The README's example store (`MapStore`, "A store of your own"). */
function readmeMapStore(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  return [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)]
    .map((m) => m[1])
    .find((code) => code.includes('export class MapStore'))!;
}

describe('the packed tarball, installed in a fresh app', () => {
  let dir: string;
  let tarball: string;
  let files: string[];
  let redis: RedisServer | undefined;

  beforeAll(async () => {
    if (withRedis) redis = await RedisServer.start();
    dir = mkdtempSync(join(tmpdir(), 'idem-packed-'));
    // prepack builds dist/ from scratch: what is packed is what the sources make now.
    const [packed] = JSON.parse(
      execFileSync('npm', ['pack', '--json', '--pack-destination', dir], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }),
    ) as { filename: string; files: { path: string }[] }[];
    tarball = join(dir, packed.filename);
    files = packed.files.map((f) => f.path);
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  }, 180_000);
  afterAll(async () => {
    await redis?.stop();
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
        'sql/sqlite/001_idempotency_records.sql',
      ]),
    );
    // No source maps: they would point at lib/*.ts, which is not shipped.
    expect(
      files.filter(
        (f) =>
          !/^dist\/.+\.(js|d\.ts)$/.test(f) &&
          !/^sql\/(postgres|sqlite)\/\d{3}_\w+\.sql$/.test(f) &&
          !['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md'].includes(f),
      ),
    ).toEqual([]);
  });

  it.each(Object.keys(KINDS) as (keyof typeof KINDS)[])(
    'a %s app compiles against it and runs the quick start, the Redis recipe on ioredis 5 and 6, the README testing recipe, and the store contract under node:test',
    async (kind) => {
      const app = join(dir, kind);
      const modules = join(app, 'node_modules');
      const installed = join(modules, 'nestjs-idempotency');
      mkdirSync(installed, { recursive: true });
      execFileSync('tar', ['-xzf', tarball, '-C', installed, '--strip-components=1']);
      writeFileSync(join(app, 'package.json'), JSON.stringify(KINDS[kind].packageJson));
      // The migrations are reachable by the package's name, as the README's recipes load them.
      expect(createRequire(join(app, 'main.js')).resolve('nestjs-idempotency/sql/postgres/001_idempotency_records.sql')).toBe(
        join(installed, 'sql', 'postgres', '001_idempotency_records.sql'),
      );
      writeFileSync(
        join(app, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            ...KINDS[kind].compilerOptions,
            target: 'ES2023',
            strict: true,
            experimentalDecorators: true,
            emitDecoratorMetadata: true,
            skipLibCheck: true,
            types: ['node'],
            outDir: 'dist',
          },
          include: ['main.ts', 'map-store.ts'],
        }),
      );
      writeFileSync(join(app, 'main.ts'), MAIN);
      writeFileSync(join(app, 'map-store.ts'), readmeMapStore());
      /** The app's own ioredis: the package's dynamic import finds it first, as in a real install. */
      const useIoredis = (folder: string) => {
        rmSync(join(modules, 'ioredis'), { force: true });
        symlinkSync(join(ROOT, 'node_modules', folder), join(modules, 'ioredis'), 'dir');
      };
      useIoredis('ioredis');
      let compiled = '';
      try {
        execFileSync(process.execPath, [TSC, '-p', app], { encoding: 'utf8' });
      } catch (err) {
        compiled = String((err as { stdout?: string }).stdout);
      }
      expect(compiled).toBe('');

      const run = async (env: Record<string, string>) => {
        const { stdout } = await execFileAsync(process.execPath, [join(app, 'dist', 'main.js')], {
          cwd: app,
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
      expect(await run({})).toEqual(replayed);

      // The shipped store contract under node:test, loaded by the package's name (import or require).
      const contract =
        kind === 'esm'
          ? "import { describe, it } from 'node:test';\nimport { InMemoryCache } from 'nestjs-idempotency';\nimport { storeContract } from 'nestjs-idempotency/testing';\n"
          : "const { describe, it } = require('node:test');\nconst { InMemoryCache } = require('nestjs-idempotency');\nconst { storeContract } = require('nestjs-idempotency/testing');\n";
      // And the README's MapStore, compiled with the app.
      const mapStore =
        kind === 'esm'
          ? "import { MapStore } from './dist/map-store.js';\n"
          : "const { MapStore } = require('./dist/map-store.js');\n";
      writeFileSync(
        join(app, 'contract.test.js'),
        `${contract}${mapStore}storeContract({ describe, it }, () => new InMemoryCache(), { name: 'InMemoryCache' });\n` +
          "storeContract({ describe, it }, () => new MapStore(), { name: 'MapStore', without: ['ping', 'peek', 'forget', 'renewAll'] });\n",
      );
      const contractRun = await execFileAsync(process.execPath, ['--test', 'contract.test.js'], {
        cwd: app,
        encoding: 'utf8',
        timeout: 120_000,
      }).then(
        ({ stdout }) => stdout,
        (err: { stdout?: string; message: string }) => `failed: ${err.stdout ?? err.message}`,
      );
      expect(contractRun).toMatch(/^# fail 0$/m);
      expect(Number(/^# pass (\d+)$/m.exec(contractRun)?.[1])).toBeGreaterThanOrEqual(25);
      expect(contractRun).toMatch(/store contract: MapStore/);

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
      if (!redis) return;
      for (const [major, folder] of [
        ['5', 'ioredis5'],
        ['6', 'ioredis'],
      ]) {
        useIoredis(folder);
        expect(JSON.parse(readFileSync(join(modules, 'ioredis', 'package.json'), 'utf8')).version).toMatch(
          new RegExp(`^${major}\\.`),
        );
        for (const client of ['store', 'app']) {
          expect(await run({ REDIS_URL: redis.url, REDIS_CLIENT: client, KEY: `${kind}-${major}-${client}` })).toEqual(replayed);
        }
      }
    },
    120_000,
  );
});
