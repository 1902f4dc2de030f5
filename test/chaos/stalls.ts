/**
 * Calls `report` for every stretch in which this process's event loop stood still for `thresholdMs`
 * or more: on two cores shared with other jobs the machine can starve a process as surely as a
 * SIGSTOP. Returns the stop.
 */
export function watchStalls(thresholdMs: number, report: (from: number, at: number) => void): () => void {
  const every = 50;
  let last = Date.now();
  const timer = setInterval(() => {
    const now = Date.now();
    if (now - last - every >= thresholdMs) report(last, now);
    last = now;
  }, every);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * The stretches Redis's latency monitor recorded (`LATENCY LATEST` / `LATENCY HISTORY`, given as
 * redis-cli's line-per-value output): each sample is a second's worst latency of one kind (an fsync
 * of the append-only file, a command), stamped in whole seconds when it ended, so the stretch is
 * taken as the latency before that second through its end.
 */
export function redisLatencies(latest: string, history: (event: string) => string): { from: number; at: number }[] {
  const lines = latest.split('\n').filter(Boolean);
  const stretches: { from: number; at: number }[] = [];
  for (let i = 0; i + 3 < lines.length; i += 4) {
    const samples = history(lines[i]).split('\n').filter(Boolean).map(Number);
    for (let j = 0; j + 1 < samples.length; j += 2) {
      const second = samples[j] * 1000;
      stretches.push({ from: second - samples[j + 1], at: second + 999 });
    }
  }
  return stretches;
}
