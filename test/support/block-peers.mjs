// Loaded with `node --import`: makes the optional peers unresolvable, as on a machine where they are
// not installed. BLOCK_PEERS (a comma list) narrows it; by default every optional peer.
import { register } from 'node:module';

const blocked = (
  process.env.BLOCK_PEERS ?? 'ioredis,pg,better-sqlite3,nestjs-cls,@nestjs-cls/transactional,typeorm,@nestjs/swagger'
).split(',');
const hooks = `
const blocked = ${JSON.stringify(blocked)};
export async function resolve(specifier, context, next) {
  const name = blocked.find((b) => specifier === b || specifier.startsWith(b + '/'));
  if (name) {
    const err = new Error("Cannot find package '" + name + "' (blocked by the test)");
    err.code = 'ERR_MODULE_NOT_FOUND';
    throw err;
  }
  return next(specifier, context);
}`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`);
