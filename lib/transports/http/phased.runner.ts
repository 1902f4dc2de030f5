import { type CallHandler, Inject, Injectable, Logger } from '@nestjs/common';
import { Observable } from 'rxjs';
import { IdempotencyException } from '../../shared/exceptions/idempotency.exception.js';
import { responseStart } from './handler.run.js';
import { rememberRun } from './request-run.store.js';
import { OutcomeReporter } from '../../core/events/outcome.reporter.js';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../../shared/idempotency.constants.js';
import { MESSAGES } from '../../shared/messages/client.messages.js';
import { LOGS } from '../../shared/messages/operator.messages.js';
import { IdempotencyService } from '../../core/idempotency.service.js';
import type { ActiveClaim } from '../../shared/interfaces/active-claim.interface.js';
import type { IdempotencyContext } from '../../shared/interfaces/idempotency-context.interface.js';
import type { RecoveryPoint } from '../../shared/interfaces/recovery-point.interface.js';
import type { ResolvedIdempotencyOptions, ResolvedRouteOptions } from '../../shared/interfaces/resolved-options.interface.js';
import { LeaseRenewer } from '../../core/lease.renewer.js';
import { PhaseSettlement, type PhaseSettlementDeps } from './phase.settlement.js';
import { PhasedRun } from '../../core/phases/phased.run.js';
import { RecordBuilder } from '../../core/record.builder.js';
import { TransactionFailures } from '../../core/transaction.failures.js';

/**
 * Runs an `atomicPhases` route: reads the key's recovery point once the key is claimed (a retry of a
 * run that crashed resumes from it), hands the handler its {@link PhasedRun}, and settles the claim
 * through a {@link PhaseSettlement}. The claim's lease is renewed while the handler runs, and each
 * phase's commit renews it too; a process that dies lets it lapse, and the next retry resumes.
 */
@Injectable()
export class PhasedRunner {
  private readonly deps: PhaseSettlementDeps;

  constructor(
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly service: IdempotencyService,
    private readonly records: RecordBuilder,
    private readonly leases: LeaseRenewer,
    failures: TransactionFailures,
    reporter: OutcomeReporter,
  ) {
    this.deps = { options, service, leases, failures, reporter, logger: new Logger('Idempotency') };
  }

  /**
   * The run of a claimed key, with what earlier attempts committed. Throws, the key released, a 422
   * when the recovery point is another request's, a 503 when it cannot be read.
   */
  async resume(call: IdempotencyContext, claim: ActiveClaim, route: ResolvedRouteOptions): Promise<PhasedRun> {
    const { store, transactions, headerName } = this.options;
    let point: RecoveryPoint | undefined;
    try {
      point = await store.recoveryPoint!(claim.storeKey);
    } catch (err) {
      throw await this.service.unavailable(claim, LOGS.recoveryPointUnread(route.id, (err as Error).message));
    }
    if (point && !call.matches(point.fingerprint, claim.fingerprint, route)) {
      const reused = IdempotencyException.of('key-reused', MESSAGES.reused(headerName));
      await this.service.release(claim, 'mismatch', reused);
      throw reused;
    }
    return new PhasedRun(claim, point, { transactions: transactions!, store, record: (r) => this.records.record(claim, r) });
  }

  run(claim: ActiveClaim, phases: PhasedRun, request: object, response: object, next: CallHandler): Observable<unknown> {
    const start = responseStart(response);
    rememberRun(request, phases);
    this.leases.hold(claim);
    return new Observable<unknown>((subscriber) => {
      const settlement = new PhaseSettlement(this.deps, claim, phases, subscriber, start);
      settlement.run.subscribe(next, subscriber, settlement);
      return settlement.run;
    });
  }
}
