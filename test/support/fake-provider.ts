import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A charge as the fake provider answers it. */
export interface ProviderCharge {
  id: string;
  amount: number;
}

/**
 * A payment provider on loopback that deduplicates like Stripe: `POST /charges` with an
 * `Idempotency-Key` creates one charge per key, and every later call with that key gets the first
 * answer again (a decline too) without charging. It counts every call per key, so a test sees both
 * how often a run called out and how many charges exist. An amount of 402 is declined.
 */
export class FakeProvider {
  /** Every call, by key (retries included). */
  readonly calls = new Map<string, number>();
  /** The first answer to each key: what a retry with it gets. */
  private readonly answers = new Map<string, { status: number; body: string }>();
  /** Charges made (one per key at most). */
  charges = 0;
  /** The next this many calls fail with 503 before charging, as an outage would. */
  failing = 0;

  private readonly server: Server = createServer((req, res) => {
    void this.handle(req).then(({ status, body }) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(body);
    });
  });
  /** `http://127.0.0.1:<port>`, once started. */
  url = '';

  private constructor() {}

  static async start(): Promise<FakeProvider> {
    const provider = new FakeProvider();
    await new Promise<void>((resolve) => provider.server.listen(0, '127.0.0.1', resolve));
    provider.url = `http://127.0.0.1:${(provider.server.address() as AddressInfo).port}`;
    return provider;
  }

  /** How many calls came with `key`. */
  callsWith(key: string): number {
    return this.calls.get(key) ?? 0;
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage): Promise<{ status: number; body: string }> {
    let text = '';
    for await (const chunk of req) text += String(chunk);
    const key = req.headers['idempotency-key'];
    if (typeof key !== 'string') return { status: 400, body: '{"error":"Idempotency-Key is required"}' };
    this.calls.set(key, this.callsWith(key) + 1);
    const seen = this.answers.get(key);
    if (seen) return seen;
    if (this.failing > 0) {
      this.failing--;
      return { status: 503, body: '{"error":"provider unavailable"}' };
    }
    const { amount } = JSON.parse(text) as { amount: number };
    const answer =
      amount === 402
        ? { status: 402, body: '{"error":"card declined"}' }
        : { status: 200, body: JSON.stringify({ id: `ch_${++this.charges}`, amount } satisfies ProviderCharge) };
    this.answers.set(key, answer);
    return answer;
  }
}
