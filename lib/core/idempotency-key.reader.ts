import { IdempotencyException } from '../shared/exceptions/idempotency.exception.js';
import { MESSAGES } from '../shared/messages/client.messages.js';
import type { ResolvedIdempotencyOptions } from '../shared/interfaces/resolved-options.interface.js';
import { decodeKey, keyViolation } from '../shared/utils/key.util.js';

/**
 * The key a request sent, as the client meant it (in a `header`, a Structured Field String unquoted), or
 * `undefined` when none or a blank one was sent: the route decides whether that is an error. A key
 * the rules refuse is a 400 (`key-invalid`).
 */
export function readKey(
  sent: string | undefined,
  { headerName, maxKeyLength }: Pick<ResolvedIdempotencyOptions, 'headerName' | 'maxKeyLength'>,
  header = true,
): string | undefined {
  if (sent === undefined) return undefined;
  // Length first, so a megabyte header is refused unread. Quoted, a key of the longest length may
  // be two quotes and a backslash per character longer.
  const quoted = header && sent.startsWith('"');
  if (sent.length > (quoted ? 2 * maxKeyLength + 2 : maxKeyLength)) {
    throw IdempotencyException.of('key-invalid', MESSAGES.tooLong(headerName, maxKeyLength));
  }
  const key = header ? decodeKey(sent) : sent;
  if (key === undefined) throw IdempotencyException.of('key-invalid', MESSAGES.malformed(headerName));
  if (key.trim() === '') return undefined;
  const problem = keyViolation(headerName, key, key.length, maxKeyLength);
  if (problem) throw IdempotencyException.of('key-invalid', problem);
  return key;
}
