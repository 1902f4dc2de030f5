import { createServer } from 'node:net';

/** A free TCP port on 127.0.0.1 (bound once, then released); 0 lets the kernel choose. */
export function freePort(wanted = 0): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(wanted, '127.0.0.1', () => {
      const address = srv.address();
      srv.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** A server on a port of its own: started with `resume()`, stopped with `stop()`. */
interface Startable {
  resume(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts a server on a free port, on another one when it fails: a port can be taken between
 * choosing and binding it. Rethrows the last failure after five attempts.
 */
export async function startRetried<T extends Startable>(create: () => Promise<T>): Promise<T> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    const server = await create();
    try {
      await server.resume();
      return server;
    } catch (error) {
      lastError = error;
      await server.stop();
    }
  }
  throw lastError;
}
