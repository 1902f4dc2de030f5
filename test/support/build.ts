import { beforeAll } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
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

/** A compile that has held its lock this long has died with it (a killed run). */
const STALE_LOCK_MS = 10 * 60_000;

/**
 * Runs `work` while holding a lock on `output`: jest's workers run side by side, and two compiles
 * of one folder at once would write over each other. A directory, as its creation is atomic.
 */
function locked(output: string, work: () => void): void {
  const lock = join(STAMPS, `${output.replace('.', '')}.lock`);
  mkdirSync(STAMPS, { recursive: true });
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const since = Date.now() - (statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (since > STALE_LOCK_MS) rmSync(lock, { recursive: true, force: true });
      else Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    }
  }
  try {
    work();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** Compiles `output` unless it is newer than every one of its sources. */
export function build(output: keyof typeof OUTPUTS): void {
  const { args, sources, marker } = OUTPUTS[output];
  const stamp = join(STAMPS, `${output.replace('.', '')}.stamp`);
  const fresh = () => existsSync(marker) && existsSync(stamp) && statSync(stamp).mtimeMs >= Math.max(...sources.map(newest));
  if (fresh()) return;
  locked(output, () => {
    // Another worker may have compiled it while this one waited.
    if (fresh()) return;
    const started = Date.now();
    execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', ...args], { stdio: 'inherit' });
    writeFileSync(stamp, '');
    // The stamp says when the compile began: a source saved during it makes the next call compile again.
    const t = new Date(started);
    utimesSync(stamp, t, t);
  });
}

/** Registers {@link build} before the suite's tests (a compile takes seconds on a small machine). */
export function built(...outputs: (keyof typeof OUTPUTS)[]): void {
  beforeAll(() => {
    for (const output of outputs) build(output);
  }, 120_000);
}
