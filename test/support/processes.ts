import type { ChildProcess } from 'node:child_process';

const live = new Set<ChildProcess>();

/** Remembers a child process so that `killTracked()` can end it if its suite's afterAll never ran. */
export function track<T extends ChildProcess>(child: T): T {
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

/**
 * Kills every tracked child that is still running and waits for it to exit. A redis-server or pod
 * left running (a beforeAll that failed half way) keeps jest alive, which turns one failed test into
 * a CI run that never ends.
 */
export async function killTracked(): Promise<void> {
  const running = [...live];
  await Promise.all(
    running.map((child) => {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      return exited;
    }),
  );
}
