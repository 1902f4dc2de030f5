import { Inject, Injectable } from '@nestjs/common';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../../shared/idempotency.constants.js';
import { IdempotencyException } from '../../shared/exceptions/idempotency.exception.js';
import { MESSAGES } from '../../shared/messages/client.messages.js';
import { CONFIG_ERRORS } from '../../shared/messages/config.messages.js';
import { InboxContext } from '../../core/values/inbox.context.js';
import { InboxRunner } from '../../core/inbox.runner.js';
import type { InboxResult, InboxRunOptions } from '../../shared/interfaces/inbox-options.interface.js';
import type { SqlExecutor } from '../../shared/interfaces/idempotency-transactions.interface.js';
import type { ResolvedIdempotencyOptions, ResolvedRouteOptions } from '../../shared/interfaces/resolved-options.interface.js';
import { resolveRouteOptions } from '../../shared/options/route-options.resolver.js';
import { escapeScope, keyViolation } from '../../shared/utils/key.util.js';

const WHERE = 'IdempotencyInbox.run()';

/** How many resolved consumer options are kept: a consumer whose ttlMs varies per message must not grow it without end. */
const ROUTES_KEPT = 1_000;

const nonEmpty = (value: unknown): value is string => typeof value === 'string' && value.trim() !== '';

/**
 * Runs a piece of work once per message id, for consumers that are not HTTP handlers (a BullMQ
 * processor, an SQS poller, a cron job, a message handler): the same stores, claim, lease renewal and
 * fencing as `@Idempotent()`. The work's result is stored as JSON; a duplicate gets it back without
 * running the work again.
 */
@Injectable()
export class IdempotencyInbox {
  /** One resolved route per consumer and ttl, the oldest dropped past {@link ROUTES_KEPT}: checked once, not on every message. */
  private readonly routes = new Map<string, ResolvedRouteOptions>();

  /** @internal Nest's injector builds it: inject it, do not construct it. */
  constructor(
    private readonly runner: InboxRunner,
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  /**
   * Runs `work` unless a message with `key` completed it already (then `duplicate` is true and `value`
   * the first run's). While another delivery of the key runs, throws `IdempotencyException` with code
   * `key-in-flight`: retry the message later, do not count it as done. A key used with another consumer
   * or payload throws `key-reused`; a store that is down, `store-unavailable`. When `work` throws, the
   * key is freed and the error rethrown: the next delivery runs it again. `work` is given the
   * transaction's SQL executor when `options.transactional` (its writes commit with the record), else
   * `undefined`.
   */
  async run<T>(
    key: string,
    options: InboxRunOptions,
    work: (sql: SqlExecutor | undefined) => T | Promise<T>,
  ): Promise<InboxResult<T>> {
    if (!nonEmpty(key)) throw new TypeError(CONFIG_ERRORS.inboxString('the key (the message id)'));
    return this.runner.run(this.route(options), new InboxContext(key, options), work);
  }

  private route(options: InboxRunOptions): ResolvedRouteOptions {
    // From JavaScript anything may come: a primitive has no consumer either.
    if (!nonEmpty((options as InboxRunOptions | null | undefined)?.consumer)) {
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
      if (this.routes.size >= ROUTES_KEPT) this.routes.delete(this.routes.keys().next().value!);
      this.routes.set(id, route);
    }
    return route;
  }
}
