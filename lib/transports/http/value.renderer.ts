import type { StoredResponse } from '../../shared/interfaces/stored-response.interface.js';
import { type HeaderSnapshot, storableHeaders } from './stored-headers.js';

const JSON_TYPE = 'application/json; charset=utf-8';

/** How each adapter sends a string when no content type was set. */
const TEXT_TYPE = { express: 'text/html; charset=utf-8', fastify: 'text/plain; charset=utf-8' } as const;

/**
 * The response the adapter would have sent for a handler's value, for the one case where it sent
 * none: the chain around the handler was torn down before the handler finished (the client went
 * away, an outer timeout answered). Serialised as Nest's adapters do it (objects as JSON, strings
 * as text, bytes as they are); what outer interceptors would have added is not there, since they
 * never saw the value. Streams are the caller's to refuse: they cannot be stored.
 */
export function renderValue(
  value: unknown,
  status: number,
  headers: Readonly<Record<string, unknown>>,
  before: HeaderSnapshot,
  adapter: keyof typeof TEXT_TYPE,
): StoredResponse {
  const stored = storableHeaders(headers, before);
  let body: Buffer;
  let type: string | undefined;
  if (value === undefined || value === null) {
    body = Buffer.alloc(0);
  } else if (value instanceof Uint8Array) {
    body = Buffer.from(value);
    type = 'application/octet-stream';
  } else if (typeof value === 'string') {
    body = Buffer.from(value);
    type = TEXT_TYPE[adapter];
  } else if (adapter === 'express' && typeof value !== 'object') {
    body = Buffer.from(String(value as number | boolean | bigint));
    type = TEXT_TYPE.express;
  } else {
    body = Buffer.from(JSON.stringify(value));
    type = JSON_TYPE;
  }
  if (type && !('content-type' in stored) && !('content-type' in before)) stored['content-type'] = type;
  return { status, headers: stored, body };
}
