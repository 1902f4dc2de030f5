import { CONFIG_ERRORS } from '../messages/config.messages.js';

/** Node's error for a package that is not installed, naming that package (quoted, as Node does). */
function notInstalled(err: unknown, name: string): boolean {
  const reason = err instanceof Error ? err.message : String(err);
  // A dependency of the peer's missing is the peer failing, not the peer missing.
  return (err as { code?: unknown }).code === 'ERR_MODULE_NOT_FOUND' && reason.includes(`'${name}'`);
}

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
    if (notInstalled(err, name)) return undefined;
    failed(err instanceof Error ? err.message : String(err));
    return undefined;
  }
}

/**
 * A peer that `feature` cannot work without, loaded with `load` when the feature is first used. Not
 * installed, it is an error that names the feature and the install line (`PostgresStore needs the
 * "pg" package: npm install pg@8`), not Node's "Cannot find package" naming a file of this package.
 * `major` is the peer's major version this package is tested with.
 */
export async function importRequired<T>(feature: string, name: string, major: number, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (err) {
    if (notInstalled(err, name)) throw new Error(CONFIG_ERRORS.missingPeer(feature, name, major), { cause: err });
    throw err;
  }
}
