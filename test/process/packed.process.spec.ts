import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

// The package as a user gets it: `npm pack`'s tarball, unpacked into the node_modules of a fresh app
// in a temporary folder outside this repository (so nothing resolves to lib/ or dist/ by accident).
// The app's other dependencies (Nest, TypeScript's types) come from this repository's node_modules,
// linked one folder up, where Node and TypeScript look after the app's own node_modules.

const ROOT = resolve('.');
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');

/** The quick start of the README, plus a bootstrap that sends one request and its retry. */
const MAIN = `import { Body, Controller, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Idempotent, IdempotencyModule } from 'nestjs-idempotency';

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

@Module({ imports: [IdempotencyModule.forRoot()], controllers: [PaymentsController] })
class AppModule {}

async function main(): Promise<void> {
  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  const send = async () => {
    const res = await fetch(\`http://127.0.0.1:\${port}/payments\`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'order-1' },
      body: JSON.stringify({ amount: 5 }),
    });
    return { status: res.status, replayed: res.headers.get('idempotent-replayed'), body: await res.text() };
  };
  const first = await send();
  const retry = await send();
  await app.close();
  console.log(JSON.stringify({ first, retry, charges }));
}
void main();
`;

/** The two project kinds `nest new` users have: the classic CommonJS layout, and ESM. */
const KINDS = {
  commonjs: { packageJson: { name: 'app-cjs', private: true }, compilerOptions: { module: 'commonjs' } },
  esm: { packageJson: { name: 'app-esm', private: true, type: 'module' }, compilerOptions: { module: 'nodenext' } },
} as const;

describe('the packed tarball, installed in a fresh app', () => {
  let dir: string;
  let tarball: string;
  let files: string[];

  beforeAll(() => {
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
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('holds the compiled package and its documents, and nothing else', () => {
    expect(files).toEqual(
      expect.arrayContaining(['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md', 'dist/index.js', 'dist/index.d.ts']),
    );
    // No source maps: they would point at lib/*.ts, which is not shipped.
    expect(
      files.filter(
        (f) => !/^dist\/.+\.(js|d\.ts)$/.test(f) && !['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md'].includes(f),
      ),
    ).toEqual([]);
  });

  it.each(Object.keys(KINDS) as (keyof typeof KINDS)[])(
    'a %s app compiles against it, runs the quick start, and its retry is replayed',
    (kind) => {
      const app = join(dir, kind);
      const installed = join(app, 'node_modules', 'nestjs-idempotency');
      mkdirSync(installed, { recursive: true });
      execFileSync('tar', ['-xzf', tarball, '-C', installed, '--strip-components=1']);
      writeFileSync(join(app, 'package.json'), JSON.stringify(KINDS[kind].packageJson));
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
          include: ['main.ts'],
        }),
      );
      writeFileSync(join(app, 'main.ts'), MAIN);
      let compiled = '';
      try {
        execFileSync(process.execPath, [TSC, '-p', app], { encoding: 'utf8' });
      } catch (err) {
        compiled = String((err as { stdout?: string }).stdout);
      }
      expect(compiled).toBe('');
      const output = execFileSync(process.execPath, [join(app, 'dist', 'main.js')], {
        cwd: app,
        encoding: 'utf8',
        timeout: 60_000,
      });
      const { first, retry, charges } = JSON.parse(output.trim().split('\n').pop()!) as {
        first: { status: number; replayed: string | null; body: string };
        retry: { status: number; replayed: string | null; body: string };
        charges: number;
      };
      expect(first).toEqual({ status: 201, replayed: null, body: '{"id":"pay_1","amount":5}' });
      expect(retry).toEqual({ status: 201, replayed: 'true', body: first.body });
      expect(charges).toBe(1);
    },
    120_000,
  );
});
