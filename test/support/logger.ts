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
    jest.restoreAllMocks();
    jest.useRealTimers();
  });
  return spies;
}
