import { describe, expect, it } from '@jest/globals';
import { importOptional } from '../../lib/shared/utils/optional-peer.util.js';

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
