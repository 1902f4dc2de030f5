import {
  type BeforeApplicationShutdown,
  HttpException,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { IDEMPOTENCY_MODULE_OPTIONS, PHASED_WORKFLOW_METADATA } from '../shared/idempotency.constants.js';
import { LOGS } from '../shared/messages/operator.messages.js';
import type { AbandonedRun } from '../shared/interfaces/recovery-point.interface.js';
import type { ResolvedIdempotencyOptions } from '../shared/interfaces/resolved-options.interface.js';
import type { StoredResponse } from '../shared/interfaces/stored-response.interface.js';
import { openClaim } from './claim.opener.js';
import { KeyClaimer } from './key.claimer.js';
import { LeaseRenewer } from './lease.renewer.js';
import { CompleterBackoff } from './phases/completer.backoff.js';
import { endsTheRun } from './phases/phase-error.classifier.js';
import { PhasedRun } from './phases/phased.run.js';
import { RecordBuilder } from './record.builder.js';
import { findsAbandonedRuns } from '../stores/contract/store.capabilities.js';
import type { IdempotencyStore } from '../stores/contract/idempotency-store.interface.js';
import type { RecoveryPoints } from '../stores/contract/store-capabilities.interface.js';

type Workflow = (run: PhasedRun, input: unknown) => Promise<unknown>;

/** How many times this process tries one abandoned run that keeps failing before it leaves it for good. */
const MAX_ATTEMPTS = 8;

/** The response Nest's default filter sends for an `HttpException`: what the client's retry gets for a run it ended. */
function rendered(err: HttpException): StoredResponse {
  const status = err.getStatus();
  const body = err.getResponse();
  const json = typeof body === 'string' ? { statusCode: status, message: body } : body;
  return { status, headers: { 'content-type': 'application/json; charset=utf-8' }, body: Buffer.from(JSON.stringify(json)) };
}

/**
 * Drives `@PhasedWorkflow()` runs that nobody finished through their last phase, without their
 * client: a process died mid-run and the client never retried. Each abandoned run is claimed like a
 * request (so a client's retry and the completer never run it at once: whoever claims first runs, the
 * other gets 409), its workflow method is called again with the stored input, and every phase already
 * committed is skipped. `finish()` then commits its writes as the run's last phase; the response is
 * rendered when the client comes back (its retry replays every phase), since only a request can say
 * what its response looks like. Bounded: `batch` runs per look, one after the other, each under a
 * lease renewed while it runs. A run that fails is tried again after a pause that doubles from
 * `idleMs` up to an hour, at most 8 times per process, then left for its client (an error log says
 * so); a run a phase ended with a 4xx (a declined card) is ended for good with that error as its
 * response, as a request's would be, and its provider is not called again.
 */
@Injectable()
export class IdempotencyCompleter implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Idempotency');
  private readonly workflows = new Map<string, Workflow>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;
  private closing = false;
  private discovered = false;
  private readonly backoff: CompleterBackoff;

  /** @internal Nest's injector builds it: inject it, do not construct it. */
  constructor(
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly leases: LeaseRenewer,
    private readonly records: RecordBuilder,
    private readonly claimer: KeyClaimer,
  ) {
    this.backoff = new CompleterBackoff(options.completer.idleMs, MAX_ATTEMPTS);
  }

  onApplicationBootstrap(): void {
    const { intervalMs } = this.options.completer;
    if (intervalMs > 0 && findsAbandonedRuns(this.options.store)) {
      this.timer = setInterval(() => void this.completeAbandoned(), intervalMs);
      this.timer.unref();
    }
  }

  /** The `@PhasedWorkflow()` methods of the application's providers: found on the first look, not at every start. */
  private discover(): void {
    if (this.discovered) return;
    this.discovered = true;
    for (const wrapper of this.discovery.getProviders()) {
      const instance = wrapper.instance as Record<string, unknown> | undefined;
      if (!instance || !wrapper.isDependencyTreeStatic()) continue;
      for (const name of this.scanner.getAllMethodNames(Object.getPrototypeOf(instance) as object)) {
        const method = instance[name] as Workflow;
        const workflow = Reflect.getMetadata(PHASED_WORKFLOW_METADATA, method) as string | undefined;
        if (workflow !== undefined) this.workflows.set(workflow, (run, input) => method.call(instance, run, input));
      }
    }
  }

  /** Waits for the run under way: the lease of a run cut short would hold its key until it lapses. */
  async beforeApplicationShutdown(): Promise<void> {
    this.closing = true;
    clearInterval(this.timer);
    await this.running;
  }

  /**
   * One look: takes up to `batch` abandoned runs and drives each, one after the other. Answers how
   * many it finished. A look already under way is shared, never doubled.
   */
  completeAbandoned(): Promise<number> {
    this.running ??= this.look().finally(() => (this.running = undefined));
    return this.running;
  }

  private async look(): Promise<number> {
    this.discover();
    const { store, completer } = this.options;
    if (!findsAbandonedRuns(store)) return 0;
    let runs: AbandonedRun[];
    try {
      runs = await store.abandonedRuns(completer.idleMs, completer.batch);
    } catch (err) {
      this.logger.warn(LOGS.completerFailed('(looking)', (err as Error).message));
      return 0;
    }
    let finished = 0;
    for (const run of runs) {
      if (this.closing) break;
      if (this.backoff.due(run.key) && (await this.complete(run, store))) finished++;
    }
    return finished;
  }

  /** Claims the run's key and calls its workflow; `false` when a client holds it, or it failed. */
  private async complete(abandoned: AbandonedRun, store: IdempotencyStore & RecoveryPoints): Promise<boolean> {
    const { transactions, leaseMs, ttlMs } = this.options;
    const name = abandoned.workflow!;
    const workflow = this.workflows.get(name);
    if (!workflow) {
      this.logger.warn(LOGS.completerUnknown(name));
      return false;
    }
    const { key, fingerprint } = abandoned;
    const claim = openClaim(key, key, fingerprint, { id: `completer ${name}`, ttlMs, leaseMs });
    try {
      if ((await this.claimer.take(claim)).state !== 'claimed') return false;
    } catch (err) {
      this.logger.warn(LOGS.completerFailed(name, (err as Error).message));
      return false;
    }
    this.leases.hold(claim);
    try {
      // Read again under the claim: a client may have moved the run on since the look.
      const point = await store.recoveryPoint(key);
      if (!point || point.fingerprint !== fingerprint) return false;
      const record = (response: Parameters<RecordBuilder['record']>[1]) => this.records.record(claim, response);
      const run = new PhasedRun(claim, point, { transactions: transactions!, store, record }, true);
      try {
        await workflow(run, point.input);
        this.logger.log(LOGS.completerFinished(name));
      } catch (err) {
        if (err !== run.endedBy || !endsTheRun(err)) throw err;
        // Ended as a request's run would be: its error is its response, and nothing calls out again.
        await run.settle(rendered(err as HttpException));
        this.logger.warn(LOGS.completerEnded(name, (err as HttpException).getStatus()));
      }
      this.backoff.ended(key);
      return true;
    } catch (err) {
      if (this.backoff.failed(key)) this.logger.error(LOGS.completerGaveUp(name, MAX_ATTEMPTS, (err as Error).message));
      else this.logger.warn(LOGS.completerFailed(name, (err as Error).message));
      return false;
    } finally {
      // The recovery point stays, now with every phase: the client's retry renders the response from it.
      await this.claimer.free(claim);
      this.leases.unhold(claim);
    }
  }
}
