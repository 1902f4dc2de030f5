import { describe, expect, it } from '@jest/globals';
import { RedisServer, redisAvailable } from '../support/redis-server.js';
import { redisLatencies, watchStalls } from './stalls.js';

// The two ways the chaos runner learns that the path to the store stood still: its own event loop
// (which carries the proxies) and Redis's latency monitor.

describe('stall sources of the fault-injection runner', () => {
  it('reports a stretch in which the event loop stood still, and nothing once stopped', async () => {
    const seen: number[] = [];
    const stop = watchStalls(200, (from, at) => seen.push(at - from));
    await new Promise((r) => setTimeout(r, 120));
    const until = Date.now() + 400;
    while (Date.now() < until); // the starved loop
    await new Promise((r) => setTimeout(r, 120));
    stop();
    expect(seen.some((ms) => ms >= 400)).toBe(true);
    const reported = seen.length;
    const until2 = Date.now() + 400;
    while (Date.now() < until2);
    await new Promise((r) => setTimeout(r, 120));
    expect(seen.length).toBe(reported);
  });

  it("reads redis-cli's LATENCY LATEST / HISTORY output into stretches, per sample", () => {
    const latest = 'aof-fsync-always\n1764000002\n700\n900\ncommand\n1764000005\n400\n400\n';
    const history: Record<string, string> = {
      'aof-fsync-always': '1764000001\n900\n1764000002\n700\n',
      command: '1764000005\n400\n',
    };
    expect(redisLatencies(latest, (event) => history[event])).toEqual([
      { from: 1764000001000 - 900, at: 1764000001999 },
      { from: 1764000002000 - 700, at: 1764000002999 },
      { from: 1764000005000 - 400, at: 1764000005999 },
    ]);
    expect(redisLatencies('', () => '')).toEqual([]);
  });

  const withRedis = redisAvailable('stall sources (Redis latency monitor)') ? it : it.skip;
  withRedis('finds a slow command of a real redis-server in its latency monitor', async () => {
    const redis = await RedisServer.start(['--latency-monitor-threshold', '100', '--enable-debug-command', 'yes'], {
      ownServer: true,
    });
    try {
      redis.cli('DEBUG', 'SLEEP', '0.3');
      const stretches = redisLatencies(redis.cli('LATENCY', 'LATEST'), (event) => redis.cli('LATENCY', 'HISTORY', event));
      expect(stretches.length).toBeGreaterThanOrEqual(1);
      const now = Date.now();
      expect(stretches.some((s) => s.at - s.from >= 300 && s.from <= now && now - s.from < 10_000)).toBe(true);
    } finally {
      await redis.stop();
    }
  });
});
