/** Resolves after the current I/O phase: lets promise chains and `setImmediate` work run. */
export const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Resolves after `ms` of real time. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Resolves once `done()` holds, checking after each I/O phase; fails after `ms` (a bound, not a measurement). */
export async function until(done: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await sleep(2);
  }
}
