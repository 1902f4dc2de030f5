/**
 * `work`, unless `ms` pass first: then the error `timedOut()` makes. The timer never keeps the
 * process alive and is cleared either way. `work` itself is not cancelled: the caller decides what a
 * late answer means (a Redis command still runs, a transaction is rolled back).
 */
export function withTimeout<T>(work: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut()), ms);
    timer.unref();
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/**
 * Resolves once `register`'s callback is called, or at the time `at` (ms since the epoch), whichever
 * comes first. The timer keeps the process alive (a shutdown that waits must not be cut short by an
 * empty event loop) and is cleared either way.
 */
export async function calledOrAt(at: number, register: (done: () => void) => void): Promise<void> {
  let bound: NodeJS.Timeout | undefined;
  await new Promise<void>((resolve) => {
    register(resolve);
    bound = setTimeout(resolve, Math.max(0, at - Date.now()));
  });
  clearTimeout(bound);
}
