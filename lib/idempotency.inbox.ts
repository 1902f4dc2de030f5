import { Inject, Injectable } from '@nestjs/common';
import { IdempotentReplay } from './exceptions/idempotent-replay.exception.js';
import { IDEMPOTENCY_MODULE_OPTIONS } from './idempotency.constants.js';
import { IdempotencyException } from './exceptions/idempotency.exception.js';
import { OutcomeReporter } from './events/outcome.reporter.js';
import { CONFIG_ERRORS, MESSAGES } from './idempotency.messages.js';
import { IdempotencyService } from './idempotency.service.js';
import { InboxContext } from './inbox/inbox.context.js';
import type { ActiveClaim } from './interfaces/active-claim.interface.js';
import type { SqlExecutor } from './interfaces/idempotency-transactions.interface.js';
import type { InboxResult, InboxRunOptions } from './interfaces/inbox-options.interface.js';
import type { ResolvedIdempotencyOptions, ResolvedRouteOptions } from './interfaces/resolved-options.interface.js';
import type { StoredResponse } from './interfaces/stored-response.interface.js';
import { LeaseRenewer } from './lease.renewer.js';
import { RecordBuilder } from './record.builder.js';
import { resolveRouteOptions } from './options/route-options.resolver.js';
import { LeaseLost, TransactionFailures } from './transaction.failures.js';
import { escapeScope, keyViolation } from './utils/key.util.js';

const WHERE = 'IdempotencyInbox.run()';
const JSON_HEADERS = { 'content-type': 'application/json' };

const nonEmpty = (value: unknown): value is string => typeof value === 'string' && value.trim() !== '';

/** What a result is stored as: JSON (an `undefined` result as an empty body, read back as `undefined`). */
const stored = (value: unknown): StoredResponse => ({
  status: 200,
  headers: JSON_HEADERS,
  body: Buffer.from(JSON.stringify(value) ?? ''),
});

/** The work to run once: in transactional mode it gets the transaction's executor. */
export type InboxWork<T> = (sql: SqlExecutor | undefined) => T | Promise<T>;

/**
 * Runs a piece of work once per message id, for consumers that are not HTTP handlers (a BullMQ
 * processor, an SQS poller, a cron job, a message handler): the same stores, claim, lease renewal and
 * fencing as `@Idempotent()`. The work's result is stored as JSON; a duplicate gets it back without
 * running the work again.
 */
@Injectable()
export class IdempotencyInbox {
  /** One resolved route per consumer and ttl: checked once, not on every message. */
  private readonly routes = new Map<string, ResolvedRouteOptions>();

  constructor(
    private readonly service: IdempotencyService,
    private readonly leases: LeaseRenewer,
    private readonly records: RecordBuilder,
    private readonly reporter: OutcomeReporter,
    private readonly failures: TransactionFailures,
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  /**
   * Runs `work` unless a message with `key` completed it already (then `duplicate` is true and `value`
   * the first run's). While another delivery of the key runs, throws `IdempotencyException` with code
   * `key-in-flight`: retry the message later, do not count it as done. A key used with another consumer
   * or payload throws `key-reused`; a store that is down, `store-unavailable`. When `work` throws, the
   * key is freed and the error rethrown: the next delivery runs it again.
   */
  async run<T>(key: string, options: InboxRunOptions, work: InboxWork<T>): Promise<InboxResult<T>> {
    if (!nonEmpty(key)) throw new TypeError(CONFIG_ERRORS.inboxString('the key (the message id)'));
    const route = this.route(options);
    let claim;
    try {
      if (this.leases.draining) throw this.service.shuttingDown();
      claim = (await this.service.begin(new InboxContext(key, options), route))!;
    } catch (err) {
      if (!(err instanceof IdempotentReplay)) throw err;
      const { body } = err.response;
      return { value: (body.length === 0 ? undefined : JSON.parse(body.toString('utf8'))) as T, duplicate: true };
    }
    if (route.transactional) return { value: await this.inTransaction(claim, work), duplicate: false };
    this.leases.hold(claim);
    let value: T;
    try {
      value = await work(undefined);
    } catch (err) {
      await this.service.release(claim).finally(() => this.leases.unhold(claim));
      throw err;
    }
    await this.service.commit(claim, stored(value), () => this.leases.unhold(claim));
    return { value, duplicate: false };
  }

  /**
   * `work` and the fenced completion of the claim in one transaction of the `transactions` port: the
   * record commits with the work's writes or not at all. The lease is `transactionTimeoutMs`, never
   * renewed: a delivery after it may run the work again, and this one's completion then matches no
   * row, so its writes roll back.
   */
  private async inTransaction<T>(claim: ActiveClaim, work: InboxWork<T>): Promise<T> {
    const { transactions, store } = this.options;
    const state = { started: false, completed: false, failed: false };
    let value!: T;
    try {
      await transactions!.run(async (sql) => {
        state.started = true;
        try {
          value = await work(sql);
        } catch (err) {
          state.failed = true;
          throw err;
        }
        const done = await store.completeIn!(
          sql,
          claim.storeKey,
          claim.owner,
          this.records.record(claim, stored(value)),
          claim.ttlMs,
        );
        if (!done) throw new LeaseLost();
        state.completed = true;
      });
    } catch (err) {
      throw (await this.failures.settle(claim, err, state, 'key')) ?? err;
    }
    this.reporter.settled(claim, 'executed', 200);
    return value;
  }

  private route(options: InboxRunOptions): ResolvedRouteOptions {
    if (options === null || typeof options !== 'object' || !nonEmpty(options.consumer)) {
      throw new TypeError(CONFIG_ERRORS.inboxString('options.consumer'));
    }
    const { scope } = options;
    if (scope !== undefined) {
      if (!nonEmpty(scope)) throw new TypeError(CONFIG_ERRORS.inboxString('options.scope, when given,'));
      const problem = keyViolation(MESSAGES.scope, scope, escapeScope(scope).length, this.options.maxScopeLength);
      if (problem) throw IdempotencyException.of('scope-invalid', problem);
    }
    const id = `${options.consumer}\n${String(options.ttlMs)}\n${String(options.transactional)}`;
    let route = this.routes.get(id);
    if (!route) {
      const { ttlMs, transactional } = options;
      route = resolveRouteOptions(WHERE, options.consumer, { ttlMs, transactional, missingHeader: 'reject' }, this.options);
      this.routes.set(id, route);
    }
    return route;
  }
}
