import { beforeAll } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

// Suites that start other processes run compiled code: the package as shipped (dist/) or the sample
// app (.build/). Each compiles on demand, and only when a source changed since the last compile, so
// unit tests run without any build and a whole run compiles each output once.

const STAMPS = 'node_modules/.cache/nestjs-idempotency';
const OUTPUTS = {
  dist: {
    args: ['-p', 'tsconfig.build.json'],
    sources: ['lib', 'tsconfig.build.json', 'tsconfig.json'],
    marker: 'dist/index.js',
  },
  // The marker is a file only this compile writes: `npm start` compiles the sample into .build/start.
  '.build': {
    args: ['-p', 'tsconfig.json', '--outDir', '.build', '--noEmit', 'false'],
    sources: ['lib', 'sample', 'bench', 'test', 'tsconfig.json'],
    marker: '.build/test/support/build.js',
  },
} as const;

function newest(path: string): number {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = stat.mtimeMs;
  for (const name of readdirSync(path)) latest = Math.max(latest, newest(join(path, name)));
  return latest;
}

/** Compiles `output` unless it is newer than every one of its sources. */
export function build(output: keyof typeof OUTPUTS): void {
  const { args, sources, marker } = OUTPUTS[output];
  const stamp = join(STAMPS, `${output.replace('.', '')}.stamp`);
  if (existsSync(marker) && existsSync(stamp) && statSync(stamp).mtimeMs >= Math.max(...sources.map(newest))) return;
  mkdirSync(STAMPS, { recursive: true });
  const started = Date.now();
  execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', ...args], { stdio: 'inherit' });
  writeFileSync(stamp, '');
  // The stamp says when the compile began: a source saved during it makes the next call compile again.
  const t = new Date(started);
  utimesSync(stamp, t, t);
}

/** Registers {@link build} before the suite's tests (a compile takes seconds on a small machine). */
export function built(...outputs: (keyof typeof OUTPUTS)[]): void {
  beforeAll(() => {
    for (const output of outputs) build(output);
  }, 120_000);
}
