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
