import { describe, expect, it } from '@jest/globals';
import { InboxContext } from '../../lib/core/values/inbox.context.js';

describe('InboxContext', () => {
  // Stored with every inbox claim and record: a release that changed it would refuse each message in
  // flight or remembered across the deploy as key-reused (another request) instead of a duplicate.
  it('fingerprints the consumer and the payload as every earlier release did', () => {
    const context = (payload?: unknown) => new InboxContext('k', { consumer: 'Orders.created', payload });
    expect(context({ order: 'o-1', amount: 5 }).fingerprint()).toBe('-VUX-Ft5P1s0Zw_S9MkRVZa_xsH0hhwyBqKbYe8vNMg');
    expect(context({ amount: 5, order: 'o-1' }).fingerprint()).toBe('-VUX-Ft5P1s0Zw_S9MkRVZa_xsH0hhwyBqKbYe8vNMg');
    expect(context().fingerprint()).toBe('HsfHk7LAdWW9h719dB0q5KyojGXTDa2pmEFoFbjQgY8');
  });
});
