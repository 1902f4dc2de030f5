/**
 * An optional peer loaded with `load`: `undefined` when it is not installed. One that is installed
 * but fails to load for another reason is handed to `failed` (a warning) and is `undefined` too:
 * an integration is never worth failing the application's start.
 */
export async function importOptional<T>(
  name: string,
  load: () => Promise<T>,
  failed: (reason: string) => void,
): Promise<T | undefined> {
  try {
    return await load();
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    // Quoted, as Node names the package it cannot find: a dependency of the peer's missing is a failure.
    if ((err as { code?: unknown }).code === 'ERR_MODULE_NOT_FOUND' && reason.includes(`'${name}'`)) return undefined;
    failed(reason);
    return undefined;
  }
}
