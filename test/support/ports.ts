import { createServer } from 'node:net';

/**
 * Ports this process was handed lately, across test files (jest runs them in one process, each with
 * its own module registry). The kernel may hand a just-released port out again, and two servers
 * started side by side (PostgreSQL and RabbitMQ in one suite) then race for one port.
 */
const handedOut: number[] = ((globalThis as { __idemHandedOutPorts?: number[] }).__idemHandedOutPorts ??= []);

function bindOnce(wanted: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(wanted, '127.0.0.1', () => {
      const address = srv.address();
      srv.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * Jest's workers run side by side (and the processes they start inherit the worker's id): each takes
 * a share of the ports of its own, so two workers never hand out the same port, which the list above
 * cannot see across processes. By half the port: Linux hands out ports of one parity to bind(0).
 * Up to four workers; one (`--runInBand`) takes a quarter of the ports.
 */
const WORKER_SLOTS = 4;
const worker = (Number(process.env.JEST_WORKER_ID ?? 1) - 1) % WORKER_SLOTS;

/**
 * A free TCP port on 127.0.0.1 (bound once, then released) of this jest worker's share, not one
 * handed out among the last 512; `wanted` checks that port instead (0 lets the kernel choose).
 */
export async function freePort(wanted = 0): Promise<number> {
  if (wanted !== 0) return bindOnce(wanted);
  for (let attempt = 0; ; attempt++) {
    const port = await bindOnce(0);
    if ((port >> 1) % WORKER_SLOTS !== worker && attempt < 200) continue;
    if (!handedOut.includes(port) || attempt >= 200) {
      handedOut.push(port);
      if (handedOut.length > 512) handedOut.shift();
      return port;
    }
  }
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
