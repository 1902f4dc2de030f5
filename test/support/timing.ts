/** Resolves after the current I/O phase: lets promise chains and `setImmediate` work run. */
export const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Resolves after `ms` of real time. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
