import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { built } from '../support/build.js';

built('dist');

// Every ```ts block of the README (and of the user guides in docs/ it links to) that starts with an
// import is a whole file a user may paste: it must compile against the package as built, imported by
// its name (a package may import itself).
const GUIDES = [
  'README.md',
  'docs/how-it-works.md',
  'docs/standards.md',
  ...readdirSync('docs/guides')
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/guides/${f}`),
];
const DIR = '.readme-check';

function completeBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]).filter((code) => code.startsWith('import '));
}

describe('README', () => {
  it('fits on a few screens, with the install and the quick start on Express and Fastify in its first 60 lines', () => {
    const lines = readFileSync('README.md', 'utf8').split('\n');
    expect(lines.length).toBeLessThanOrEqual(350);
    const start = lines.slice(0, 60).join('\n');
    expect(start).toContain('## Install');
    expect(start).toContain('npm install /path/to/nestjs-idempotency');
    expect(start).toContain('IdempotencyModule.forRoot()');
    expect(start).toContain('NestFactory.create(AppModule)');
    expect(start).toContain('new FastifyAdapter()');
  });

  it('has complete examples, and every one compiles', () => {
    const blocks = GUIDES.flatMap((guide) => completeBlocks(readFileSync(guide, 'utf8')));
    expect(blocks.length).toBeGreaterThanOrEqual(12);
    rmSync(DIR, { recursive: true, force: true });
    mkdirSync(DIR);
    // The first block that exports what another imports (`import { MapStore } from './map-store.js'`,
    // the quick start's `AppModule` from './app.module.js') is saved under that name; the others are numbered.
    const imported = new Map(
      blocks.flatMap((code) =>
        [...code.matchAll(/^import \{ (\w+) \} from '\.\/([\w.-]+)\.js';$/gm)].map((m) => [m[1], m[2]] as const),
      ),
    );
    blocks.forEach((code, i) => {
      const exported = /^export class (\w+)/m.exec(code)?.[1];
      const named = exported === undefined ? undefined : imported.get(exported);
      if (named !== undefined) imported.delete(exported!);
      writeFileSync(join(DIR, `${named ?? `example-${i + 1}`}.ts`), code);
    });
    writeFileSync(
      join(DIR, 'tsconfig.json'),
      JSON.stringify({ extends: '../tsconfig.json', compilerOptions: { rootDir: '.', noEmit: true }, include: ['*.ts'] }),
    );
    // On TypeScript 6, and on 7 (npm's default now, installed beside it under an alias).
    const compile = (tsc: string): string => {
      try {
        execFileSync(process.execPath, [tsc, '-p', join(DIR, 'tsconfig.json')], { encoding: 'utf8' });
        return '';
      } catch (err) {
        return String((err as { stdout?: string }).stdout);
      }
    };
    let outputs: string[];
    try {
      outputs = [compile('node_modules/typescript/bin/tsc'), compile('node_modules/typescript7/bin/tsc')];
    } finally {
      rmSync(DIR, { recursive: true, force: true });
    }
    expect(outputs).toEqual(['', '']);
  }, 120_000);
});
