import type { ServerResponse } from 'node:http';
import type { StoredResponse } from '../interfaces/stored-response.interface.js';
import { isFastifyReply } from './response.adapter.js';

const returnThis = function (this: unknown) {
  return this;
};

function ignored(result: (self: unknown) => unknown) {
  return function (this: unknown, ...args: unknown[]) {
    // Whoever waits on a write's callback must not wait for ever: call it, as for a finished write.
    const callback = args.find((a) => typeof a === 'function') as (() => void) | undefined;
    if (callback) process.nextTick(callback);
    return result(this);
  };
}

const LOCKED_RAW = {
  setHeader: returnThis,
  appendHeader: returnThis,
  removeHeader: returnThis,
  writeHead: returnThis,
  flushHeaders: returnThis,
  write: ignored(() => true),
  end: ignored((self) => self),
};
const LOCKED_REPLY = {
  code: returnThis,
  status: returnThis,
  header: returnThis,
  headers: returnThis,
  type: returnThis,
  send: returnThis,
};

// One locked prototype per original prototype (Express's app.response, each Fastify route's Reply).
const lockedPrototypes = new WeakMap<object, object>();

/**
 * Makes `target` ignore `methods` from now on. By a prototype swap, as Express itself does per request:
 * own methods on every response would fork its hidden class on each replay. Methods a middleware set as
 * own properties (compression wraps `write` and `end`) are shadowed one by one.
 */
function lock(target: object, methods: Readonly<Record<string, unknown>>): void {
  const prototype = Object.getPrototypeOf(target) as object;
  let locked = lockedPrototypes.get(prototype);
  if (!locked) {
    locked = Object.assign(Object.create(prototype) as object, methods);
    lockedPrototypes.set(prototype, locked);
  }
  Object.setPrototypeOf(target, locked);
  for (const name of Object.keys(methods)) {
    if (Object.hasOwn(target, name)) (target as Record<string, unknown>)[name] = methods[name];
  }
}

/**
 * Sends `response` as the final answer, then locks the response: whatever a filter, an interceptor
 * or the framework writes after it (an application's catch-all filter answering the exception the
 * interceptor throws next) changes nothing. Headers already on the response (set by middleware for
 * this request: CORS, a request id) stay unless `response` has its own value for them.
 */
export function sendFinal(res: object, response: StoredResponse, extraHeaders: Readonly<Record<string, string>>): void {
  if (isFastifyReply(res)) {
    res.code(response.status);
    for (const name of Object.keys(response.headers)) res.header(name, response.headers[name]);
    for (const name of Object.keys(extraHeaders)) res.header(name, extraHeaders[name]);
    res.send(response.body.length > 0 ? response.body : undefined);
    lock(res, LOCKED_REPLY);
    return;
  }
  const raw = res as ServerResponse;
  raw.statusCode = response.status;
  for (const name of Object.keys(response.headers)) raw.setHeader(name, response.headers[name]);
  for (const name of Object.keys(extraHeaders)) raw.setHeader(name, extraHeaders[name]);
  raw.end(response.body);
  lock(raw, LOCKED_RAW);
}
