import { describe, expect, it } from '@jest/globals';
import { of } from 'rxjs';
import { transportTable } from '../../lib/core/transport.table.js';
import type { IdempotencyTransport } from '../../lib/core/idempotency-transport.interface.js';

const transport = (contextType: string): IdempotencyTransport => ({
  contextType,
  handle: () => Promise.resolve(of(contextType)),
});

describe('transportTable', () => {
  it('finds each transport by the context type it serves', () => {
    const http = transport('http');
    const rpc = transport('rpc');
    const table = transportTable([http, rpc]);
    expect([table.get('http'), table.get('rpc'), table.get('graphql'), table.size]).toEqual([http, rpc, undefined, 2]);
  });

  it('refuses two transports for one context type at startup, naming it', () => {
    expect(() => transportTable([transport('http'), transport('bus'), transport('bus')])).toThrow(
      "two idempotency transports serve the context type 'bus': register one",
    );
  });
});
