import { Inject, Injectable, Logger, type OnModuleInit, type Type } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { AsyncResource } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../../shared/idempotency.constants.js';
import { LOGS } from '../../shared/messages/operator.messages.js';
import type { IdempotencyErrorCode } from '../../shared/interfaces/idempotency-error.interface.js';
import type {
  IdempotencyEvent,
  IdempotencyEventListener,
  IdempotencyOutcome,
} from '../../shared/interfaces/idempotency-event.interface.js';
import type { ResolvedIdempotencyOptions } from '../../shared/interfaces/resolved-options.interface.js';
import { instanceFromContainer } from '../../shared/utils/container.util.js';
import { loadOpenTelemetry, type StoreOperation, Telemetry } from './telemetry.js';

type Listener = (event: IdempotencyEvent) => unknown;

/** What the request path knows of an outcome; the rest of the event is filled in here. */
export interface OutcomeFacts {
  readonly route?: string;
  readonly method?: string;
  readonly status?: number;
  readonly code?: IdempotencyErrorCode;
  readonly storeMs?: number;
  /** The key as sent: only its hash leaves this class. */
  readonly key?: string;
}

/** The key as the client sent it, from a store key: prefix, escaped scope (it holds no `:`), `:`, key. */
function clientKey(storeKey: string, prefix: string): string {
  return storeKey.slice(storeKey.indexOf(':', prefix.length) + 1);
}

/** Listener calls still running past this many are not started: the events are dropped (and counted). */
const MAX_PENDING = 1000;
/** A failing or overloaded listener is reported at most once per this many ms. */
const REPORT_EVERY_MS = 60_000;

const isListenerClass = (value: unknown): value is Type<IdempotencyEventListener> =>
  typeof (value as { prototype?: Partial<IdempotencyEventListener> } | undefined)?.prototype?.onIdempotencyEvent === 'function';

/**
 * Where outcomes go: OpenTelemetry's instruments (when `@opentelemetry/api` is installed) and the
 * `events` listener. With neither, `enabled` is false and the request path skips even the clock.
 *
 * The listener is isolated from requests: events are queued and handed over after the current turn
 * of the event loop (after the response decision has been written); what it throws or rejects with is
 * logged, and a listener that leaves more than {@link MAX_PENDING} promises unsettled gets no more
 * events until they settle. Work it does synchronously still runs on the event loop: keep it short.
 */
@Injectable()
export class IdempotencyObserver implements OnModuleInit {
  private readonly logger = new Logger('Idempotency');
  private telemetry: Telemetry | undefined;
  private listener: Listener | undefined;
  private queue: { outcome: IdempotencyOutcome; facts: OutcomeFacts; at: number; context: AsyncResource }[] = [];
  private pending = 0;
  private dropped = 0;
  private reportedAt = -Infinity;
  /** Whether anything listens: read on every request before any work for it is done. */
  enabled = false;
  readonly store: string;

  constructor(
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly moduleRef: ModuleRef,
  ) {
    this.store = options.store.constructor.name;
  }

  async onModuleInit(): Promise<void> {
    const { events, openTelemetry } = this.options;
    if (openTelemetry) {
      const api = await loadOpenTelemetry((reason) => this.logger.warn(LOGS.openTelemetryFailed(reason)));
      this.telemetry = api && new Telemetry(api);
    }
    if (isListenerClass(events)) {
      const instance = await instanceFromContainer(this.moduleRef, events);
      this.listener = (event) => instance.onIdempotencyEvent(event);
    } else {
      this.listener = events;
    }
    this.enabled = this.telemetry !== undefined || this.listener !== undefined;
    if (this.enabled)
      this.options.store.watchEvictions?.((key) => this.emit('evicted', { key: clientKey(key, this.options.keyPrefix) }));
  }

  /** A start time for {@link stored}; 0 (no clock read) when nothing listens. */
  now(): number {
    return this.enabled ? performance.now() : 0;
  }

  /** Records a store call that began at `startedAt` (and failed with `error`, if given) and returns how long it took, in ms. */
  stored(operation: StoreOperation, startedAt: number, error?: unknown): number {
    if (!this.enabled) return 0;
    const ms = performance.now() - startedAt;
    this.telemetry?.storeDuration(operation, this.store, ms, error);
    return ms;
  }

  /** Sets an outcome on the active span (the HTTP request's) only. */
  mark(outcome: IdempotencyOutcome): void {
    this.telemetry?.mark(outcome);
  }

  /** Reports an outcome: counted and set on the active span now, handed to the listener after this turn. */
  emit(outcome: IdempotencyOutcome, facts: OutcomeFacts): void {
    if (!this.enabled) return;
    this.telemetry?.outcome(outcome, facts.route, facts.method, this.store);
    if (outcome !== 'lease-lost' && outcome !== 'evicted') this.telemetry?.mark(outcome);
    if (!this.listener) return;
    // The event is built (and the key hashed) when it is delivered, off the request's path. Each is
    // delivered in the async context of the request that emitted it: a batch runs in the first
    // one's otherwise, and a listener reading its request's CLS (a request id) got another's.
    const context = new AsyncResource('IdempotencyEvent');
    if (this.queue.push({ outcome, facts, at: Date.now(), context }) === 1) setImmediate(() => this.deliver());
  }

  private deliver(): void {
    const queued = this.queue;
    this.queue = [];
    for (const { outcome, facts, at, context } of queued) {
      if (this.pending >= MAX_PENDING) {
        this.dropped++;
        this.report(LOGS.listenerBehind(MAX_PENDING, this.dropped));
        continue;
      }
      const event: IdempotencyEvent = {
        outcome,
        route: facts.route,
        method: facts.method,
        status: facts.status,
        code: facts.code,
        storeMs: facts.storeMs ?? 0,
        keyHash: facts.key === undefined ? undefined : createHash('sha256').update(facts.key).digest('hex'),
        store: this.store,
        at,
      };
      let result: unknown;
      try {
        result = context.runInAsyncScope(this.listener!, undefined, event);
        // Inside the try: reading `then` runs the listener's code too (a getter may throw).
        if (typeof (result as PromiseLike<unknown> | undefined)?.then !== 'function') continue;
      } catch (err) {
        this.report(LOGS.listenerFailed(err instanceof Error ? err.message : String(err)));
        continue;
      }
      this.pending++;
      Promise.resolve(result).then(
        () => this.pending--,
        (err: unknown) => {
          this.pending--;
          this.report(LOGS.listenerFailed(err instanceof Error ? err.message : String(err)));
        },
      );
    }
  }

  private report(line: string): void {
    const now = Date.now();
    if (now - this.reportedAt < REPORT_EVERY_MS) return;
    this.reportedAt = now;
    this.logger.error(line);
  }
}
