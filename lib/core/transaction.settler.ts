import { Inject, Injectable } from '@nestjs/common';
import { OutcomeReporter } from './events/outcome.reporter.js';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../shared/idempotency.constants.js';
import { FAILURES } from '../shared/messages/operator.messages.js';
import type { ActiveClaim } from '../shared/interfaces/active-claim.interface.js';
import type { SqlExecutor } from '../shared/interfaces/idempotency-transactions.interface.js';
import type { ResolvedIdempotencyOptions } from '../shared/interfaces/resolved-options.interface.js';
import type { StoredResponse } from '../shared/interfaces/stored-response.interface.js';
import { IdempotencyService } from './idempotency.service.js';
import { TransactionFailures } from './transaction.failures.js';

/**
 * The `transactional` way a claim settles, for every surface: "claim outside, complete inside,
 * fenced". The work runs in one transaction of the `transactions` port and the fenced completion of
 * the claim is that transaction's last statement, so the record commits with the work's writes or
 * not at all. The lease is the route's `transactionTimeoutMs`, never renewed: a retry after it may run
 * the work again, and this run's completion then matches no row, so its writes roll back.
 */
@Injectable()
export class TransactionSettler {
  constructor(
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly service: IdempotencyService,
    private readonly failures: TransactionFailures,
    private readonly reporter: OutcomeReporter,
  ) {}

  /**
   * Runs `work` in the transaction, then completes the claim with what `record` makes of its value.
   * Resolves to the value once COMMIT has landed. Rejects with the work's own error (the key freed), or
   * with the module's answer to a failed BEGIN, completion or COMMIT, whose key is freed only when
   * the writes are known to be rolled back. `keyName` names the key in a timed-out answer.
   */
  async run<T>(
    claim: ActiveClaim,
    work: (sql: SqlExecutor) => Promise<T>,
    record: (value: T) => StoredResponse | Promise<StoredResponse>,
    keyName: string,
  ): Promise<T> {
    const state = { started: false, failed: false, completed: false };
    let value!: T;
    let status = 0;
    try {
      await this.options.transactions!.run(async (sql) => {
        state.started = true;
        try {
          value = await work(sql);
        } catch (err) {
          state.failed = true;
          throw err;
        }
        const response = await record(value);
        await this.service.completeIn(sql, claim, response);
        state.completed = true;
        status = response.status;
      });
      // A port that returns without running the work opened no transaction: answered as BEGIN failing.
      if (!state.started) throw new Error(FAILURES.workNotRun);
    } catch (err) {
      throw (await this.failures.settle(claim, err, state, keyName)) ?? err;
    }
    this.reporter.settled(claim, 'executed', status);
    return value;
  }
}
