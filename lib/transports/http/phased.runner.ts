import { type CallHandler, Inject, Injectable, Logger } from '@nestjs/common';
import { Observable } from 'rxjs';
import { responseStart } from './handler.run.js';
import { rememberRun } from './request-run.store.js';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../../shared/idempotency.constants.js';
import type { ActiveClaim } from '../../shared/interfaces/active-claim.interface.js';
import type { IdempotencyContext } from '../../shared/interfaces/idempotency-context.interface.js';
import type { ResolvedIdempotencyOptions, ResolvedRouteOptions } from '../../shared/interfaces/resolved-options.interface.js';
import { PhaseSettlement } from './phase.settlement.js';
import { PhaseSettler } from '../../core/phase.settler.js';
import type { PhasedRun } from '../../core/phases/phased.run.js';

/**
 * Runs an `atomicPhases` route: resumes the claimed key from its recovery point (a retry of a run
 * that crashed resumes from it), hands the handler its {@link PhasedRun} through the request, and
 * settles the claim through a {@link PhaseSettlement}. A process that dies lets the lease lapse, and
 * the next retry resumes.
 */
@Injectable()
export class PhasedRunner {
  private readonly logger = new Logger('Idempotency');

  constructor(
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly settler: PhaseSettler,
  ) {}

  /** The run of a claimed key: see {@link PhaseSettler.resume}. */
  resume(call: IdempotencyContext, claim: ActiveClaim, route: ResolvedRouteOptions): Promise<PhasedRun> {
    return this.settler.resume(claim, (stored) => call.matches(stored, claim.fingerprint, route));
  }

  run(claim: ActiveClaim, phases: PhasedRun, request: object, response: object, next: CallHandler): Observable<unknown> {
    const start = responseStart(response);
    rememberRun(request, phases);
    this.settler.hold(claim);
    return new Observable<unknown>((subscriber) => {
      const settlement = new PhaseSettlement(this.settler, this.options, this.logger, claim, phases, subscriber, start);
      settlement.run.subscribe(next, subscriber, settlement);
      return settlement.run;
    });
  }
}
