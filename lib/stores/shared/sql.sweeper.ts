import type { Logger } from '@nestjs/common';
import { LOGS } from '../../shared/messages/operator.messages.js';

/**
 * Runs a store's sweep every `intervalMs`, give or take a quarter (so pods started together drift
 * apart), on an unref'd timer that never keeps the process alive; `0` never runs it. One sweep at a
 * time: the next is scheduled when the last has finished.
 */
export class SqlSweeper {
  private timer: NodeJS.Timeout | undefined;
  private running = false;

  constructor(
    private readonly intervalMs: number,
    private readonly sweep: () => Promise<number>,
    private readonly logger: Logger,
  ) {}

  start(): void {
    if (this.intervalMs === 0 || this.running) return;
    this.running = true;
    this.schedule();
  }

  stop(): void {
    this.running = false;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(): void {
    const delay = Math.round(this.intervalMs * (0.75 + Math.random() / 2));
    this.timer = setTimeout(() => {
      this.sweep().then(
        () => this.running && this.schedule(),
        (err: Error) => {
          this.logger.warn(LOGS.sweepFailed(err.message));
          if (this.running) this.schedule();
        },
      );
    }, delay);
    this.timer.unref();
  }
}
