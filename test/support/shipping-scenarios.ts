import { expect, it } from '@jest/globals';

/** What the transactional message scenarios drive: a `ship` message handler over a real transport. */
export interface Shipping {
  /** Sends the `ship` message of an order (its key: the order's message id) and resolves with the reply. */
  ship(order: string): Promise<unknown>;
  /** Shipments the handler wrote for an order. */
  shipments(order: string): Promise<number>;
  /** Orders whose next handler run throws after its write. */
  readonly failing: Set<string>;
}

/**
 * Exactly once with the database for a transactional message handler, the same on every database:
 * the inbox record commits in the handler's transaction. Call inside the suite's describe.
 */
export function shippingScenarios(shipping: () => Shipping): void {
  it('one shipment per message id, however often and however concurrently it is delivered', async () => {
    const { ship, shipments } = shipping();
    const answers = await Promise.allSettled(Array.from({ length: 5 }, () => ship('o-1')));
    const replies = answers.filter((a) => a.status === 'fulfilled').map((a) => a.value);
    expect(replies.length).toBeGreaterThanOrEqual(1);
    expect(new Set(replies.map((r) => JSON.stringify(r))).size).toBe(1);
    for (const refused of answers.filter((a) => a.status === 'rejected')) {
      expect(refused.reason).toMatchObject({ code: 'IDEMPOTENCY_KEY_IN_FLIGHT' });
    }
    expect(await ship('o-1')).toEqual(replies[0]);
    expect(await shipments('o-1')).toBe(1);
  });

  it('a handler that throws after its write is rolled back with it, and the redelivery writes once', async () => {
    const { ship, shipments, failing } = shipping();
    failing.add('o-2');
    await expect(ship('o-2')).rejects.toBeDefined();
    expect(await shipments('o-2')).toBe(0);
    const reply = await ship('o-2');
    expect(reply).toEqual({ shipment: expect.any(Number) });
    expect(await ship('o-2')).toEqual(reply);
    expect(await shipments('o-2')).toBe(1);
  });
}
