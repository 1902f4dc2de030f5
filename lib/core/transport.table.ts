import { CONFIG_ERRORS } from '../shared/messages/config.messages.js';
import type { IdempotencyTransport } from './idempotency-transport.interface.js';

/** The transports by the context type each serves; two for one type is a startup error, not a silent pick. */
export function transportTable(transports: readonly IdempotencyTransport[]): ReadonlyMap<string, IdempotencyTransport> {
  const table = new Map<string, IdempotencyTransport>();
  for (const transport of transports) {
    if (table.has(transport.contextType)) throw new Error(CONFIG_ERRORS.transportTwice(transport.contextType));
    table.set(transport.contextType, transport);
  }
  return table;
}
