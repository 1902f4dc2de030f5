import { PHASED_WORKFLOW_METADATA } from '../../shared/idempotency.constants.js';
import { CONFIG_ERRORS } from '../../shared/messages/config.messages.js';
import type { PhasedRun } from '../../core/phases/phased.run.js';

/** A workflow's method: the run of its phases, then what it needs to run again (JSON). */
type WorkflowMethod = (run: PhasedRun, input: never) => Promise<unknown>;

/**
 * Marks a provider's method `(run: PhasedRun, input) => Promise<…>` as the resumable workflow `name`:
 * each run it is given keeps `name` and `input` with its recovery point, and `IdempotencyCompleter`
 * calls the method again with them to drive a run nobody came back for to its end. `input` must be
 * all the method needs (JSON: ids, amounts, the caller's account), never a request or a credential.
 */
export function PhasedWorkflow(name: string): MethodDecorator {
  if (typeof name !== 'string' || !/^[\w.:-]{1,100}$/.test(name)) throw new Error(CONFIG_ERRORS.workflowName);
  return (_target, _key, descriptor) => {
    const method = descriptor.value as unknown as WorkflowMethod;
    const named = function (this: unknown, run: PhasedRun, input: never): Promise<unknown> {
      run.resumable(name, input);
      return method.call(this, run, input);
    };
    Object.defineProperty(named, 'name', { value: method.name });
    Reflect.defineMetadata(PHASED_WORKFLOW_METADATA, name, named);
    (descriptor as PropertyDescriptor).value = named;
  };
}
