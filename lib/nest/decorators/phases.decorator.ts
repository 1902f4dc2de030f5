import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import { runOf } from '../../transports/http/request-run.store.js';
import { FAILURES } from '../../shared/messages/operator.messages.js';

/** What `@Phases()` reads: the run the interceptor made for the request's claim. */
export function readPhasedRun(_data: unknown, context: ExecutionContext): object {
  const run = runOf(context.switchToHttp().getRequest<object>());
  if (!run) throw new Error(FAILURES.noRun);
  return run;
}

/**
 * The `PhasedRun` of an `@Idempotent({ atomicPhases: true })` route's request: the handler's work as
 * atomic phases, resumed by a retry after a crash. See docs/guides/recovery-points.md.
 */
export const Phases = createParamDecorator(readPhasedRun);
