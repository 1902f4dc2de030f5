import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import type { StoredResponse } from '../../shared/interfaces/stored-response.interface.js';

const DECODERS: Readonly<Record<string, (body: Buffer) => Buffer>> = {
  gzip: gunzipSync,
  'x-gzip': gunzipSync,
  deflate: inflateSync,
  br: brotliDecompressSync,
};

/**
 * The identity representation of a recorded response. On Fastify a compression plugin
 * (`@fastify/compress`) encodes the body in `onSend`, before the bytes reach `end()` where they are
 * recorded: stored as they are, every retry would get the first client's encoding whatever it
 * asked for. The record keeps the decoded body instead; a replay is sent through the reply, so the
 * plugin encodes it again as the retry negotiates (and sets Vary). A coding it cannot undo, or a
 * body that does not decode, is kept as it came.
 */
export function identityOf(response: StoredResponse): StoredResponse {
  const coding = response.headers['content-encoding'];
  if (coding === undefined) return response;
  const decode = typeof coding === 'string' ? DECODERS[coding.trim().toLowerCase()] : undefined;
  if (!decode) return response;
  let body: Buffer;
  try {
    body = decode(response.body);
  } catch {
    return response;
  }
  const headers = { ...response.headers };
  delete headers['content-encoding'];
  return { status: response.status, headers, body };
}
