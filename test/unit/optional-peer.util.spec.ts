import { describe, expect, it } from '@jest/globals';
import { importOptional, importRequired } from '../../lib/shared/utils/optional-peer.util.js';

const notFound = (name: string) =>
  Object.assign(new Error(`Cannot find package '${name}' imported from x`), { code: 'ERR_MODULE_NOT_FOUND' });

describe('importOptional', () => {
  it('hands back the loaded module', async () => {
    await expect(
      importOptional(
        'p',
        async () => ({ ok: 1 }),
        () => undefined,
      ),
    ).resolves.toEqual({ ok: 1 });
  });

  it('is undefined, silently, when the package itself is not installed', async () => {
    const failures: string[] = [];
    await expect(
      importOptional(
        'p',
        () => Promise.reject(notFound('p')),
        (r) => void failures.push(r),
      ),
    ).resolves.toBeUndefined();
    expect(failures).toEqual([]);
  });

  it('reports a peer that is installed but fails, or misses a package of its own', async () => {
    const failures: string[] = [];
    const failed = (r: string) => void failures.push(r);
    await expect(importOptional('p', () => Promise.reject(new Error('boom')), failed)).resolves.toBeUndefined();
    await expect(importOptional('p', () => Promise.reject(notFound('dep-of-p')), failed)).resolves.toBeUndefined();
    // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- a non-Error is what the test is about
    await expect(importOptional('p', () => Promise.reject('not an error'), failed)).resolves.toBeUndefined();
    expect(failures).toEqual(['boom', "Cannot find package 'dep-of-p' imported from x", 'not an error']);
  });
});

describe('importRequired', () => {
  it('hands back the loaded module', async () => {
    await expect(importRequired('PostgresStore', 'pg', 8, async () => ({ ok: 1 }))).resolves.toEqual({ ok: 1 });
  });

  it("names the feature and the install line when the package is not installed, keeping Node's error as the cause", async () => {
    const missing = notFound('pg');
    const err = (await importRequired('PostgresStore', 'pg', 8, () => Promise.reject(missing)).catch((e: unknown) => e)) as Error;
    expect(err.message).toBe('PostgresStore needs the "pg" package: npm install pg@8');
    expect(err.cause).toBe(missing);
  });

  it("passes on a peer's own failure, or a package of its own that is missing, as it is", async () => {
    const broken = new Error('boom');
    await expect(importRequired('PostgresStore', 'pg', 8, () => Promise.reject(broken))).rejects.toBe(broken);
    const dependency = notFound('pg-types');
    await expect(importRequired('PostgresStore', 'pg', 8, () => Promise.reject(dependency))).rejects.toBe(dependency);
    const uncoded = new Error("pg's native binding for 'pg' failed to load");
    await expect(importRequired('PostgresStore', 'pg', 8, () => Promise.reject(uncoded))).rejects.toBe(uncoded);
    const unnamed = Object.assign(new Error('Cannot find package'), { code: 'ERR_MODULE_NOT_FOUND' });
    await expect(importRequired('PostgresStore', 'pg', 8, () => Promise.reject(unnamed))).rejects.toBe(unnamed);
  });
});
