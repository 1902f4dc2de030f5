// Loaded with `node --import`: makes the optional peers unresolvable, as on a machine where they are
// not installed. BLOCK_PEERS (a comma list) narrows it; by default every optional peer. BREAK_PEERS
// (a comma list) makes those resolve to a module that throws when loaded: installed but broken.
import { register } from 'node:module';

const blocked = (
  process.env.BLOCK_PEERS ??
  'ioredis,pg,mysql2,better-sqlite3,nestjs-cls,@nestjs-cls/transactional,typeorm,@nestjs/swagger,@opentelemetry/api,@nestjs/terminus,@nestjs/microservices,graphql'
)
  .split(',')
  .filter(Boolean);
const broken = (process.env.BREAK_PEERS ?? '').split(',').filter(Boolean);
const hooks = `
const blocked = ${JSON.stringify(blocked)};
const broken = ${JSON.stringify(broken)};
const matches = (specifier, name) => specifier === name || specifier.startsWith(name + '/');
export async function resolve(specifier, context, next) {
  const faulty = broken.find((b) => matches(specifier, b));
  if (faulty) {
    return { url: 'data:text/javascript,' + encodeURIComponent('throw new Error("' + faulty + ' is broken (by the test)")'), shortCircuit: true };
  }
  const name = blocked.find((b) => matches(specifier, b));
  if (name) {
    const err = new Error("Cannot find package '" + name + "' (blocked by the test)");
    err.code = 'ERR_MODULE_NOT_FOUND';
    throw err;
  }
  return next(specifier, context);
}`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`);
