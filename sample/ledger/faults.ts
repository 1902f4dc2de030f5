import { Inject, Injectable } from '@nestjs/common';
import { LEDGER_OPTIONS, type LedgerOptions } from './ledger.options.js';

/** The crashes the tests inject: a pod that dies between COMMIT and its response, or at a point of a phased run. */
@Injectable()
export class Faults {
  constructor(@Inject(LEDGER_OPTIONS) private readonly options: LedgerOptions) {}

  private commits = 0;

  /** `after-commit` dies after the first COMMIT of the port, `after-commit:<n>` after the n-th. */
  afterCommit(): void {
    this.commits++;
    this.at('after-commit');
    this.at(`after-commit:${this.commits}`);
  }

  /** Dies here, by SIGKILL, when the pod was started with this fault. */
  at(point: string): void {
    if (this.options.fault === point) process.kill(process.pid, 'SIGKILL');
  }
}
