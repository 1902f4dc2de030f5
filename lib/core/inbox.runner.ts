import { Inject, Injectable, Logger } from '@nestjs/common';
import { IdempotentReplay } from '../shared/exceptions/idempotent-replay.exception.js';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../shared/idempotency.constants.js';
import { IdempotencyService } from './idempotency.service.js';
import type { IdempotencyContext } from '../shared/interfaces/idempotency-context.interface.js';
import type { SqlExecutor } from '../shared/interfaces/idempotency-transactions.interface.js';
import type { InboxResult } from '../shared/interfaces/inbox-options.interface.js';
import type { ResolvedIdempotencyOptions, ResolvedRouteOptions } from '../shared/interfaces/resolved-options.interface.js';
import { LeaseRenewer } from './lease.renewer.js';
import { TransactionSettler } from './transaction.settler.js';
import { CommitSettler } from './commit.settler.js';
import { lossyPart } from './values/lossy-value.js';
import { replayedValue, storedValue } from './values/stored-value.js';
import { LOGS } from '../shared/messages/operator.messages.js';

/** The work to run once: in transactional mode it gets the transaction's executor. */
export type InboxWork<T> = (sql: SqlExecutor | undefined) => T | Promise<T>;

/**
 * Runs work once per key with no response to record, its result kept as JSON: what
 * `IdempotencyInbox.run()` and `@Idempotent()` message handlers share. The caller has resolved the
 * route and built the context (key, scope, fingerprint).
 */
@Injectable()
export class InboxRunner {
  private readonly logger = new Logger('Idempotency');
  /** The handlers and consumers whose first value was looked at for types JSON changes. */
  private readonly looked = new WeakSet<ResolvedRouteOptions>();

  constructor(
    private readonly service: IdempotencyService,
    private readonly leases: LeaseRenewer,
    private readonly transaction: TransactionSettler,
    private readonly plain: CommitSettler,
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  async run<T>(route: ResolvedRouteOptions, context: IdempotencyContext, work: InboxWork<T>): Promise<InboxResult<T>> {
    let claim;
    try {
      if (this.leases.draining) throw this.service.shuttingDown();
      claim = (await this.service.begin(context, route))!;
    } catch (err) {
      if (!(err instanceof IdempotentReplay)) throw err;
      return { value: replayedValue(err.response) as T, duplicate: true };
    }
    if (route.settling === 'transaction') {
      const stored = (value: T) => this.stored(route, value);
      return { value: await this.transaction.run(claim, async (sql) => work(sql), stored, 'key'), duplicate: false };
    }
    const value = await this.plain.run(
      claim,
      async () => work(undefined),
      (v: T) => this.stored(route, v),
    );
    return { value, duplicate: false };
  }

  /**
   * Never throws: a value that cannot be stored settles the key with a refusal, so it is neither held
   * nor run again. The first value of each handler or consumer is looked at for types JSON changes
   * (a Date, a class instance, a Map): a duplicate would read it back otherwise, which is said once.
   */
  private stored(route: ResolvedRouteOptions, value: unknown) {
    if (!this.looked.has(route)) {
      this.looked.add(route);
      const lossy = lossyPart(value);
      if (lossy) this.logger.warn(LOGS.lossyValue(route.id, lossy));
    }
    return storedValue(value, route.id, this.options.maxResponseBytes, this.logger);
  }
}
