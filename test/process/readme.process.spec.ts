import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { built } from '../support/build.js';

built('dist');

// Every ```ts block of the README (and of the user guides in docs/ it links to) that starts with an
// import is a whole file a user may paste: it must compile against the package as built, imported by
// its name (a package may import itself).
const GUIDES = ['README.md', 'docs/how-it-works.md', 'docs/exactly-once.md', 'docs/standards.md', 'docs/operations.md'];
const DIR = '.readme-check';

function completeBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]).filter((code) => code.startsWith('import '));
}

describe('README', () => {
  it('has complete examples, and every one compiles', () => {
    const blocks = GUIDES.flatMap((guide) => completeBlocks(readFileSync(guide, 'utf8')));
    expect(blocks.length).toBeGreaterThanOrEqual(12);
    rmSync(DIR, { recursive: true, force: true });
    mkdirSync(DIR);
    // A block that another imports (`import { MapStore } from './map-store.js'`) is saved under that
    // name; the others are numbered.
    const imported = new Map(
      blocks.flatMap((code) =>
        [...code.matchAll(/^import \{ (\w+) \} from '\.\/([\w-]+)\.js';$/gm)].map((m) => [m[1], m[2]] as const),
      ),
    );
    blocks.forEach((code, i) => {
      const exported = /^export class (\w+)/m.exec(code)?.[1];
      const file = exported !== undefined && imported.has(exported) ? imported.get(exported)! : `example-${i + 1}`;
      writeFileSync(join(DIR, `${file}.ts`), code);
    });
    writeFileSync(
      join(DIR, 'tsconfig.json'),
      JSON.stringify({ extends: '../tsconfig.json', compilerOptions: { rootDir: '.', noEmit: true }, include: ['*.ts'] }),
    );
    let output = '';
    try {
      execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', join(DIR, 'tsconfig.json')], { encoding: 'utf8' });
    } catch (err) {
      output = String((err as { stdout?: string }).stdout);
    } finally {
      rmSync(DIR, { recursive: true, force: true });
    }
    expect(output).toBe('');
  }, 120_000);
});
