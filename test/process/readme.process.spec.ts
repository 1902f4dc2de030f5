import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { built } from '../support/build.js';
import { guideFiles } from '../support/guide-blocks.js';

built('dist');

// Every ```ts block of the README (and of the user guides in docs/ it links to) that starts with an
// import is a whole file a user may paste: it must compile against the package as built, imported by
// its name (a package may import itself). The packed-tarball suite compiles the same files in fresh
// CommonJS and ESM apps.
const DIR = '.readme-check';

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
    const files = guideFiles();
    expect(files.size).toBeGreaterThanOrEqual(12);
    rmSync(DIR, { recursive: true, force: true });
    mkdirSync(DIR);
    for (const [name, code] of files) writeFileSync(join(DIR, name), code);
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
