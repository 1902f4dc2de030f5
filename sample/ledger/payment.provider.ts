import { HttpException, Inject, Injectable, ServiceUnavailableException } from '@nestjs/common';
import { LEDGER_OPTIONS, type LedgerOptions } from './ledger.options.js';

/** A charge as the payment provider answers it. */
export interface ProviderCharge {
  id: string;
  amount: number;
}

/**
 * The payment provider of the rides route, called with an idempotency key as Stripe is. With
 * PAYMENT_PROVIDER_URL it POSTs `/charges` there; without, it is a stand-in in this process that
 * deduplicates the same way (one charge per key). A 402 (a declined card) ends the run and is stored;
 * any other failure is retryable.
 */
@Injectable()
export class PaymentProvider {
  private readonly local = new Map<string, ProviderCharge>();

  constructor(@Inject(LEDGER_OPTIONS) private readonly options: LedgerOptions) {}

  async charge(amount: number, currency: string, idempotencyKey: string): Promise<ProviderCharge> {
    const url = this.options.providerUrl;
    if (!url) return this.localCharge(amount, idempotencyKey);
    let res: Response;
    try {
      res = await fetch(`${url}/charges`, {
        method: 'POST',
        headers: { 'idempotency-key': idempotencyKey, 'content-type': 'application/json' },
        body: JSON.stringify({ amount, currency }),
      });
    } catch {
      throw new ServiceUnavailableException({ error: 'the payment provider cannot be reached; retry with the same key' });
    }
    if (res.status === 402) throw new HttpException({ error: 'the card was declined' }, 402);
    if (!res.ok) throw new ServiceUnavailableException({ error: 'the payment provider failed; retry with the same key' });
    return (await res.json()) as ProviderCharge;
  }

  private localCharge(amount: number, key: string): ProviderCharge {
    let charge = this.local.get(key);
    if (!charge) this.local.set(key, (charge = { id: `ch_local_${this.local.size + 1}`, amount }));
    return charge;
  }
}
