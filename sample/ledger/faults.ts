import { Inject, Injectable } from '@nestjs/common';
import { LEDGER_OPTIONS, type LedgerOptions } from './ledger.options.js';

/** The crash the tests inject: a pod that dies between COMMIT and its response. */
@Injectable()
export class Faults {
  constructor(@Inject(LEDGER_OPTIONS) private readonly options: LedgerOptions) {}

  afterCommit(): void {
    if (this.options.fault === 'after-commit') process.kill(process.pid, 'SIGKILL');
  }
}
