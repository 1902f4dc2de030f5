import type { Answer } from './pod.js';
import { sleep } from './timing.js';

// A client of the ledger sample's charges route (sample/ledger), as the ledger pods suites of each
// database drive it.

/** One charge as alice, with its key. */
export async function charge(base: string, key: string, amount = 100): Promise<Answer> {
  const res = await fetch(`${base}/api/ledger/charges`, {
    method: 'POST',
    headers: { authorization: 'Bearer alice-token', 'idempotency-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ amount, currency: 'EUR' }),
  });
  return { status: res.status, text: await res.text(), replayed: res.headers.get('idempotent-replayed') === 'true' };
}

/** A request whose pod dies before answering: the connection error, as a client sees it. */
export const crashed = (answer: Promise<Answer>): Promise<Answer | 'connection lost'> =>
  answer.catch(() => 'connection lost' as const);

/** Retries while the key is held (409) or the database is away (5xx), as a client would. */
export async function retryUntilSettled(base: string, key: string, tries = 200): Promise<Answer> {
  let answer = await charge(base, key);
  for (let i = 0; i < tries && (answer.status === 409 || answer.status >= 500); i++) {
    await sleep(50);
    answer = await charge(base, key);
  }
  return answer;
}
