import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pay, Pod } from '../support/pod.js';
import { built } from '../support/build.js';

built('dist', '.build');

const BLOCK = ['--import', './test/support/block-ioredis.mjs'];

function jsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? jsFiles(join(dir, e.name)) : e.name.endsWith('.js') ? [join(dir, e.name)] : [],
  );
}

describe('ioredis is optional', () => {
  it('no built file outside the Redis store names ioredis, and that one only loads it on demand', () => {
    const files = jsFiles('dist');
    expect(files.length).toBeGreaterThan(10);
    const naming = files.filter((f) => readFileSync(f, 'utf8').includes('ioredis')).map((f) => relative('dist', f));
    expect(naming.sort()).toEqual(['stores/redis-cache.options.js', 'stores/redis.cache.js']);
    expect(readFileSync('dist/stores/redis-cache.options.js', 'utf8')).not.toMatch(/import[^;]*ioredis/);
    const source = readFileSync('dist/stores/redis.cache.js', 'utf8');
    expect(source).not.toMatch(/^\s*import[^(]*['"]ioredis['"]/m);
    expect(source).toContain("import('ioredis')");
  });

  it('the blocking hook really hides ioredis', () => {
    const run = () =>
      execFileSync(process.execPath, [...BLOCK, '--input-type=module', '-e', "await import('ioredis')"], { stdio: 'pipe' });
    expect(run).toThrow(/Cannot find package 'ioredis'/);
  });

  it('the package and the sample app run on InMemoryCache without ioredis', async () => {
    const pod = await Pod.start({ database: ':memory:', nodeArgs: BLOCK });
    try {
      const first = await pay(pod.base, 'no-redis');
      const retry = await pay(pod.base, 'no-redis');
      expect(first.status).toBe(201);
      expect(retry).toEqual({ status: 201, text: first.text, replayed: true });
    } finally {
      await pod.kill();
    }
  });
});
