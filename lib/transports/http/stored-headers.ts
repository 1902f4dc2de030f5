import type { OutgoingHttpHeader, OutgoingHttpHeaders } from 'node:http';

/**
 * Headers a replay must not repeat: hop-by-hop ones (RFC 9110 §7.6.1), those the server computes
 * for each response, and cookies, which belong to the first caller's session only.
 */
const UNSTORED_HEADERS = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'date',
  'set-cookie',
]);

/**
 * Headers that describe the body (RFC 9110 §8): they belong to the stored representation whoever set
 * them, a middleware before the handler included. A replay sends them with the body they describe.
 */
const REPRESENTATION_HEADERS = new Set([
  'content-type',
  'content-language',
  'content-encoding',
  'content-location',
  'content-disposition',
  'etag',
  'last-modified',
]);

export type HeaderInput = OutgoingHttpHeaders | readonly (string | string[])[] | undefined;
/** Headers the response held before the handler ran (lower-case names). */
export type HeaderSnapshot = Readonly<Record<string, unknown>>;

export function addHeaders(target: Record<string, string | string[]>, headers: HeaderInput, before: HeaderSnapshot): void {
  if (!headers) return;
  if (Array.isArray(headers)) {
    // writeHead(status, [name, value, name, value, ...])
    // Array.isArray narrows a readonly array to any[]: name the element type again.
    const list = headers as readonly (string | string[])[];
    for (let i = 0; i + 1 < list.length; i += 2) addHeader(target, String(list[i]), list[i + 1], before);
    return;
  }
  for (const name of Object.keys(headers)) addHeader(target, name, (headers as OutgoingHttpHeaders)[name], before);
}

function addHeader(
  target: Record<string, string | string[]>,
  name: string,
  value: OutgoingHttpHeader | undefined,
  before: HeaderSnapshot,
): void {
  const lower = name.toLowerCase();
  if (value === undefined || UNSTORED_HEADERS.has(lower)) return;
  // Set for this request before the handler ran (CORS, a request id): a retry gets its own.
  if (lower in before && String(before[lower]) === String(value) && !REPRESENTATION_HEADERS.has(lower)) return;
  target[lower] = Array.isArray(value) ? value.map(String) : String(value);
}

/** The headers of `headers` a record keeps: neither unstored ones nor request-scoped ones unchanged since `before`. */
export function storableHeaders(
  headers: Readonly<Record<string, unknown>>,
  before: HeaderSnapshot,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  addHeaders(out, headers as OutgoingHttpHeaders, before);
  return out;
}
