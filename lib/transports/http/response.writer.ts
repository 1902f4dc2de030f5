import { ServerResponse } from 'node:http';
import type { StoredResponse } from '../../shared/interfaces/stored-response.interface.js';
import { isFastifyReply } from '../../shared/http/response.adapter.js';

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
const LOCKED_NAMES = Object.keys(LOCKED_RAW) as (keyof typeof LOCKED_RAW)[];
const LOCKED_REPLY = {
  code: returnThis,
  status: returnThis,
  header: returnThis,
  headers: returnThis,
  type: returnThis,
  send: returnThis,
};

// One locked prototype per original prototype (Express's `app.response`).
const lockedPrototypes = new WeakMap<object, object>();

/**
 * Makes a Node response ignore every later write. On Express by a prototype swap, as Express itself
 * does per request: seven own methods on each replayed response forked its hidden class, 15 % of a
 * replay's CPU. A response on Node's own prototype keeps own methods, as the recorder does: there a
 * swap slowed Node's http internals, which had seen one shape of response. Methods a middleware made
 * own properties (compression wraps `write` and `end`) are shadowed one by one.
 */
function lockRaw(raw: ServerResponse): void {
  const prototype = Object.getPrototypeOf(raw) as object;
  if (prototype === ServerResponse.prototype) {
    Object.assign(raw, LOCKED_RAW);
    return;
  }
  let locked = lockedPrototypes.get(prototype);
  if (!locked) {
    locked = Object.assign(Object.create(prototype) as object, LOCKED_RAW);
    lockedPrototypes.set(prototype, locked);
  }
  Object.setPrototypeOf(raw, locked);
  for (const name of LOCKED_NAMES) if (Object.hasOwn(raw, name)) Object.assign(raw, { [name]: LOCKED_RAW[name] });
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
    // Own methods: a prototype swap on Fastify's Reply cost 6 µs more per replay than this (A/B).
    Object.assign(res, LOCKED_REPLY);
    return;
  }
  const raw = res as ServerResponse;
  raw.statusCode = response.status;
  for (const name of Object.keys(response.headers)) raw.setHeader(name, response.headers[name]);
  for (const name of Object.keys(extraHeaders)) raw.setHeader(name, extraHeaders[name]);
  raw.end(response.body);
  lockRaw(raw);
}
