import { afterEach, beforeEach, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';

/** The spies of {@link spyOnLogger}, replaced before each test. */
export interface LoggerSpies {
  errors: ReturnType<typeof jest.spyOn>;
  warnings: ReturnType<typeof jest.spyOn>;
}

/**
 * Silences Nest's Logger for each test of the enclosing describe and records its error and warn
 * calls; restores every mock and real timers afterwards. Call it inside a describe, not at a file's
 * root: test/mutation/ imports many spec files into one.
 */
export function spyOnLogger(): LoggerSpies {
  const spies = {} as LoggerSpies;
  beforeEach(() => {
    spies.errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    spies.warnings = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });
  afterEach(() => {
    // Nest's Logger prints its context in brackets, and operators filter on it: a warning or an
    // error without one (this package logs as Idempotency, or as the store's class) is a defect.
    const unnamed = [spies.errors, spies.warnings]
      .flatMap((spy) =>
        spy.mock.calls.map((args: unknown[], i: number) => ({ args, logger: spy.mock.contexts[i] as { context?: string } })),
      )
      .filter((call) => !call.logger?.context);
    jest.restoreAllMocks();
    jest.useRealTimers();
    if (unnamed.length > 0) throw new Error(`logged without a context: ${String(unnamed[0].args[0])}`);
  });
  return spies;
}
