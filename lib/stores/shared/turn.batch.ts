import { setImmediate as nextCheckPhase } from 'node:timers';
import type { Queued } from './lane.batch.js';

/**
 * Sends the items of one kind asked for in one turn of the event loop together, in its check phase:
 * one command for up to `max` of them. Where the commands of a turn leave in one socket write anyway
 * (a corked Redis client), a lone item goes no later than it did, and under load one command's
 * client-side work (its object, promise, encoding and reply parsing) is paid once for many.
 *
 * Items go in the order asked; one key may come more than once, and `send` answers each as a command
 * of its own would. A failed command fails every item in it; an answer that is an `Error` fails its
 * item alone. Taken from `node:timers`, not the global, so a test's fake timers do not hold it back.
 */
export class TurnBatch<I, O> {
  private queue: Queued<I, O>[] = [];
  private readonly flush = (): void => {
    const queue = this.queue;
    this.queue = [];
    for (let start = 0; start < queue.length; start += this.max) void this.sendBatch(queue.slice(start, start + this.max));
  };

  /**
   * @param max the most items one command carries.
   * @param send sends one command for `items` and answers in their order.
   */
  constructor(
    private readonly max: number,
    private readonly send: (items: readonly I[]) => Promise<readonly (O | Error)[]>,
  ) {}

  add(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      if (this.queue.push({ item, resolve, reject }) === 1) nextCheckPhase(this.flush);
    });
  }

  private async sendBatch(batch: readonly Queued<I, O>[]): Promise<void> {
    try {
      const answers = await this.send(batch.map((queued) => queued.item));
      batch.forEach((queued, i) => {
        const answer = answers[i];
        if (answer instanceof Error) queued.reject(answer);
        else queued.resolve(answer);
      });
    } catch (error) {
      for (const queued of batch) queued.reject(error);
    }
  }
}
