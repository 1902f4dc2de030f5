import { describe, expect, it, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import { SqlSweeper } from '../../lib/stores/shared/sql.sweeper.js';
import { spyOnLogger } from '../support/logger.js';

describe('SqlSweeper', () => {
  const log = spyOnLogger();
  const logger = new Logger('Store');

  it('sweeps every interval, one sweep at a time, until stopped', async () => {
    jest.useFakeTimers();
    // The jitter's middle: every pause is exactly the interval; the next test covers the jitter's range.
    jest.spyOn(Math, 'random').mockReturnValue(0.5);
    const sweep = jest.fn(async () => 0);
    const sweeper = new SqlSweeper(1000, sweep, logger);
    sweeper.start();
    sweeper.start(); // a second start adds no second timer
    expect(jest.getTimerCount()).toBe(1);
    await jest.advanceTimersByTimeAsync(999);
    expect(sweep).not.toHaveBeenCalled();
    await jest.advanceTimersByTimeAsync(1);
    expect(sweep).toHaveBeenCalledTimes(1);
    await jest.advanceTimersByTimeAsync(1000);
    expect(sweep).toHaveBeenCalledTimes(2);
    sweeper.stop();
    expect(jest.getTimerCount()).toBe(0);
    await jest.advanceTimersByTimeAsync(10_000);
    expect(sweep).toHaveBeenCalledTimes(2);
  });

  it('draws each delay from 0.75 to 1.25 intervals, so pods started together drift apart', () => {
    jest.useFakeTimers();
    const delays: number[] = [];
    const real = global.setTimeout;
    const spy = jest.spyOn(global, 'setTimeout').mockImplementation(((fn: () => void, ms: number) => {
      delays.push(ms);
      return real(fn, 1e9);
    }) as never);
    for (const random of [0, 0.5, 0.999]) {
      jest.spyOn(Math, 'random').mockReturnValueOnce(random);
      const sweeper = new SqlSweeper(1000, async () => 0, logger);
      sweeper.start();
      sweeper.stop();
    }
    spy.mockRestore();
    expect(delays).toEqual([750, 1000, 1250]);
  });

  it('never runs with interval 0, and its timer never keeps the process alive', () => {
    jest.useFakeTimers();
    const off = new SqlSweeper(0, async () => 0, logger);
    off.start();
    expect(jest.getTimerCount()).toBe(0);
    jest.useRealTimers();
    const on = new SqlSweeper(60_000, async () => 0, logger);
    on.start();
    const timer = (on as unknown as { timer: NodeJS.Timeout }).timer;
    expect(timer.hasRef()).toBe(false);
    on.stop();
  });

  it('logs a failed sweep and tries again at the next interval', async () => {
    jest.useFakeTimers();
    // The jitter's middle: every pause is exactly the interval (a random one made the count vary).
    jest.spyOn(Math, 'random').mockReturnValue(0.5);
    const sweep = jest.fn(async () => 0).mockRejectedValueOnce(new Error('server down'));
    const sweeper = new SqlSweeper(1000, sweep, logger);
    sweeper.start();
    await jest.advanceTimersByTimeAsync(1000);
    expect(sweep).toHaveBeenCalledTimes(1);
    expect(log.warnings).toHaveBeenCalledWith(
      'sweeping expired idempotency rows failed; the next sweep tries again: server down',
    );
    await jest.advanceTimersByTimeAsync(1000);
    expect(sweep).toHaveBeenCalledTimes(2);
    sweeper.stop();
  });

  it('a sweep finishing after stop() schedules nothing more', async () => {
    jest.useFakeTimers();
    let finish: (n: number) => void = () => undefined;
    const sweep = jest.fn(() => new Promise<number>((r) => (finish = r)));
    const sweeper = new SqlSweeper(1000, sweep, logger);
    sweeper.start();
    await jest.advanceTimersByTimeAsync(1250);
    sweeper.stop();
    finish(0);
    await jest.advanceTimersByTimeAsync(10_000);
    expect(sweep).toHaveBeenCalledTimes(1);
    expect(jest.getTimerCount()).toBe(0);
  });
});
