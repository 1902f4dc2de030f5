import { Logger } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { IdempotencyException } from '../../shared/exceptions/idempotency.exception.js';
import { LeaseLost } from '../../shared/exceptions/lease-lost.error.js';
import { FINISHED } from '../../shared/idempotency.constants.js';
import { MESSAGES } from '../../shared/messages/client.messages.js';
import { FAILURES, LOGS } from '../../shared/messages/operator.messages.js';
import type { ActiveClaim } from '../../shared/interfaces/active-claim.interface.js';
import type { IdempotencyRecord, IdempotencyStore } from '../../stores/contract/idempotency-store.interface.js';
import type { IdempotencyTransactions, SqlExecutor } from '../../shared/interfaces/idempotency-transactions.interface.js';
import type { RecoveryPoint } from '../../shared/interfaces/recovery-point.interface.js';
import type { StoredResponse } from '../../shared/interfaces/stored-response.interface.js';
import { withTimeout } from '../../shared/utils/timeout.util.js';
import { endsTheRun } from './phase-error.classifier.js';

/** What a phased run commits through: the module's `transactions` port and a store with recovery points. */
export interface PhaseBackend {
  readonly transactions: IdempotencyTransactions;
  readonly store: IdempotencyStore;
  /** The record a response becomes (sealed when `encryption` is on). */
  record(response: StoredResponse): IdempotencyRecord;
}

/** A phase's name: it keys the phase's result in the recovery point and derives its foreign key. */
const MAX_PHASE_NAME = 100;

/** The response `finish()` waits for inside its open transaction, and what came of it. */
interface Finishing {
  /** `finish()`'s callback returned: its transaction now waits for the response. */
  handedOver: boolean;
  deliver: (response: StoredResponse) => void;
  abandon: (err: unknown) => void;
  outcome: Promise<void>;
}

/**
 * One attempt of an `@Idempotent({ atomicPhases: true })` handler, handed to it by `@Phases()`: the
 * handler's work split into atomic phases, each committed in a transaction of its own together with
 * the key's recovery point (the phase's result). A retry after a crash resumes at the first phase not
 * committed, with the results of those before; a retry after `finish()` gets the stored response.
 *
 * Results travel as JSON (a `Date` comes back as a string, `undefined` as `null`), the same whether
 * the phase ran in this attempt or an earlier one. Each name is used once per run.
 */
export class PhasedRun {
  /** The phases an earlier attempt of this request committed, in order: this one skips them. */
  readonly done: readonly string[];
  /** The error thrown inside a phase that ends the run: its response is stored and replayed. */
  endedBy: unknown = undefined;
  /** The record's fenced completion ran: a failure now is COMMIT's, whose outcome is unknown. */
  completed = false;
  private readonly results: Readonly<Record<string, unknown>>;
  private readonly used = new Set<string>();
  private finishing: Finishing | undefined;
  /** The run's `@PhasedWorkflow()`, stored with its first phase for a completer. */
  private workflow: { name: string; input: string } | undefined;

  /**
   * @internal The module builds a run for each claimed key and hands it over (`@Phases()`, a workflow's
   * argument). `completing`: a completer drives the run, with no client to answer; `finish()` is then a phase.
   */
  constructor(
    private readonly claim: ActiveClaim,
    point: RecoveryPoint | undefined,
    private readonly backend: PhaseBackend,
    private readonly completing = false,
  ) {
    this.results = point?.results ?? {};
    this.done = (point?.phases ?? Object.keys(this.results)).filter((name) => name !== FINISHED);
  }

  /**
   * Names the run a resumable workflow with its input (JSON), kept with its recovery point so that
   * `IdempotencyCompleter` can drive it to its end when no client comes back. `@PhasedWorkflow()`
   * calls it; call it yourself before the first phase only to name a workflow by hand.
   */
  resumable(workflow: string, input: unknown): void {
    this.workflow ??= { name: workflow, input: JSON.stringify(input ?? null) };
  }

  /**
   * The idempotency key to pass on to an outside service for phase `name`: the same on every attempt
   * of this request, different for every other key, caller scope and phase (43 characters, base64url).
   */
  keyFor(name: string): string {
    return createHash('sha256').update(this.claim.storeKey).update('\n').update(name).digest('base64url');
  }

  /**
   * Runs `work` in one transaction of the `transactions` port that also records its result as the
   * recovery point, and answers that result; skipped, answering the stored result, when an earlier
   * attempt committed it.
   */
  async phase<T>(name: string, work: (sql: SqlExecutor) => T | Promise<T>): Promise<T> {
    this.use(name);
    if (Object.hasOwn(this.results, name)) return this.results[name] as T;
    const changed = this.changed(name);
    if (changed) throw changed;
    return this.advance(name, work);
  }

  /**
   * Calls an outside service with {@link keyFor}`(name)` as its idempotency key, then records its
   * result with `record` (your local write of it) in the next transaction, as a phase. A crash between
   * the two makes the next attempt call again with the same key, which the service deduplicates.
   * Answers what `record` returns, or the call's result without `record`.
   */
  async foreign<R, T = R>(
    name: string,
    call: (key: string) => R | Promise<R>,
    record?: (sql: SqlExecutor, result: R) => T | Promise<T>,
  ): Promise<T> {
    this.use(name);
    if (Object.hasOwn(this.results, name)) return this.results[name] as T;
    const changed = this.changed(name);
    if (changed) throw changed;
    const result = await this.guard(() => call(this.keyFor(name)));
    return this.advance(name, record ? (sql) => record(sql, result) : () => result as unknown as T);
  }

  /**
   * Runs `respond` in the run's last transaction and answers its value, the handler's response. The
   * transaction stays open until that response has gone through the interceptors and filters: the
   * record of it commits with `respond`'s writes, and the recovery point is deleted, or nothing does.
   */
  finish<T>(respond: (sql: SqlExecutor) => T | Promise<T>): Promise<T> {
    if (this.finishing) return Promise.reject(new Error(FAILURES.phaseTwice(FINISHED)));
    // A completer ran it: its writes are committed, and its value is the response to render now.
    if (Object.hasOwn(this.results, FINISHED)) return Promise.resolve(this.results[FINISHED] as T);
    const changed = this.changed(FINISHED);
    if (changed) return Promise.reject(changed);
    if (this.completing) return this.advance(FINISHED, respond);
    const finishing: Finishing = { handedOver: false, deliver: () => {}, abandon: () => {}, outcome: Promise.resolve() };
    const response = new Promise<StoredResponse>((resolve, reject) => {
      finishing.deliver = resolve;
      finishing.abandon = reject;
    });
    this.finishing = finishing;
    return new Promise<T>((resolve, reject) => {
      finishing.outcome = this.backend.transactions.run(async (sql) => {
        const value = await this.guard(() => respond(sql));
        finishing.handedOver = true;
        resolve(value);
        // Bounded: a response that never reaches end() must not hold the transaction open for ever.
        await this.complete(sql, await withTimeout(response, this.claim.leaseMs, () => new LeaseLost(FAILURES.leaseOver)));
      });
      finishing.outcome.catch((err: unknown) => {
        if (finishing.handedOver) return; // the settlement reads the outcome
        this.finishing = undefined;
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the caller's own error, passed on as thrown
        reject(err);
      });
    });
  }

  /**
   * Commits `response` as the key's record, deleting the recovery point: in `finish()`'s open
   * transaction when it handed the response over, else in a transaction of its own (a handler that
   * returned without `finish()`, or the response of an error that ended the run).
   */
  settle(response: StoredResponse): Promise<void> {
    const { finishing } = this;
    if (finishing?.handedOver) {
      finishing.deliver(response);
      return finishing.outcome;
    }
    return this.backend.transactions.run((sql) => this.complete(sql, response));
  }

  /** The handler failed after `finish()` handed its value over: its transaction rolls back. */
  abandon(err: unknown): void {
    if (this.finishing?.handedOver) this.finishing.abandon(err);
  }

  private async complete(sql: SqlExecutor, response: StoredResponse): Promise<void> {
    const { claim, backend } = this;
    if (!(await backend.store.finishIn!(sql, claim.storeKey, claim.owner, backend.record(response), claim.ttlMs))) {
      throw new LeaseLost();
    }
    this.completed = true;
  }

  private async advance<T>(name: string, work: (sql: SqlExecutor) => T | Promise<T>): Promise<T> {
    const { claim, backend } = this;
    const result = await backend.transactions.run(async (sql) => {
      const json = JSON.stringify((await this.guard(() => work(sql))) ?? null);
      const { leaseMs, ttlMs, fingerprint } = claim;
      const point = {
        fingerprint,
        phase: name,
        result: json,
        leaseMs,
        ttlMs,
        workflow: this.workflow?.name,
        input: this.workflow?.input,
      };
      if (!(await backend.store.advanceIn!(sql, claim.storeKey, claim.owner, point))) throw new LeaseLost();
      return json;
    });
    return JSON.parse(result) as T;
  }

  /** Runs the caller's code, noting an error that ends the run. */
  private async guard<T>(work: () => T | Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      if (this.endedBy === undefined && endsTheRun(err)) this.endedBy = err;
      throw err;
    }
  }

  /**
   * The refusal of new work (`name`) while a phase an earlier attempt committed has not been reached:
   * the handler's phases changed (a deploy reordered, renamed or removed them), and going on could
   * write a charge with no ride. A retry meets the same refusal (500) until an operator acts.
   */
  private changed(name: string): IdempotencyException | undefined {
    const skipped = this.done.filter((phase) => !this.used.has(phase));
    if (skipped.length === 0) return undefined;
    new Logger('Idempotency').error(LOGS.phasesChanged(this.claim.storeKey, name, this.done, skipped));
    return IdempotencyException.of('phases-changed', MESSAGES.phasesChanged);
  }

  private use(name: string): void {
    if (typeof name !== 'string' || name.length === 0 || name.length > MAX_PHASE_NAME || name === FINISHED) {
      throw new Error(FAILURES.phaseName(MAX_PHASE_NAME));
    }
    if (this.used.has(name)) throw new Error(FAILURES.phaseTwice(name));
    if (this.finishing) throw new Error(FAILURES.phaseTwice(name));
    this.used.add(name);
  }
}
