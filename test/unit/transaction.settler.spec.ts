import { describe, expect, it, jest } from '@jest/globals';
import { TransactionFailures } from '../../lib/core/transaction.failures.js';
import { TransactionSettler } from '../../lib/core/transaction.settler.js';
import type { IdempotencyService } from '../../lib/core/idempotency.service.js';
import type { OutcomeReporter } from '../../lib/core/events/outcome.reporter.js';
import { IdempotencyException } from '../../lib/shared/exceptions/idempotency.exception.js';
import type { ActiveClaim } from '../../lib/shared/interfaces/active-claim.interface.js';
import type { ResolvedIdempotencyOptions } from '../../lib/shared/interfaces/resolved-options.interface.js';

const claim = { route: 'Pay.create', storeKey: 'k', owner: 'o' } as ActiveClaim;

describe('TransactionSettler', () => {
  it('a transactions port that returns without running the work is answered as BEGIN failing: 503, the key freed', async () => {
    const answer = IdempotencyException.of('store-unavailable', 'down');
    const unavailable = jest.fn((_claim: ActiveClaim, _why: string) => Promise.resolve(answer));
    const service = { unavailable } as unknown as IdempotencyService;
    const reporter = { settled: jest.fn() } as unknown as OutcomeReporter;
    const options = { transactions: { run: () => Promise.resolve() } } as unknown as ResolvedIdempotencyOptions;
    const settler = new TransactionSettler(options, service, new TransactionFailures(service, reporter), reporter);
    const work = jest.fn(() => Promise.resolve('never'));

    await expect(settler.run(claim, work, () => ({ status: 200, headers: {}, body: Buffer.alloc(0) }), 'key')).rejects.toBe(
      answer,
    );
    expect(work).not.toHaveBeenCalled();
    expect(unavailable.mock.calls[0][1]).toBe(
      'Pay.create: the transaction could not be opened, answering 503: the transactions port returned without running the work (no transaction was opened)',
    );
    expect(reporter.settled).not.toHaveBeenCalled();
  });
});
