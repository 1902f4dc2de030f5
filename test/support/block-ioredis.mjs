// Loaded with `node --import`: makes `ioredis` unresolvable, as on a machine where it is not installed.
import { register } from 'node:module';

const hooks = `
export async function resolve(specifier, context, next) {
  if (specifier === 'ioredis' || specifier.startsWith('ioredis/')) {
    const err = new Error("Cannot find package 'ioredis' (blocked by the test)");
    err.code = 'ERR_MODULE_NOT_FOUND';
    throw err;
  }
  return next(specifier, context);
}`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`);
