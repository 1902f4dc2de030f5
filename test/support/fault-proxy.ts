import { createConnection, createServer, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP proxy in front of a server (PostgreSQL, Redis) that delays every chunk by
 * `delayMs` in each direction, keeping order: the store then sits "in another zone". It can also
 * cut every connection at once (a partition) and refuse new ones until healed.
 */
export class LatencyProxy {
  private readonly sockets = new Set<Socket>();
  private cut = false;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    public delayMs: number,
  ) {}

  static async start(targetPort: number, delayMs: number): Promise<LatencyProxy> {
    // eslint-disable-next-line prefer-const -- assigned once the server knows its port
    let proxy: LatencyProxy;
    const server = createServer((client) => proxy.pipe(client, targetPort));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (!address || typeof address === 'string') throw new Error('no address');
    proxy = new LatencyProxy(server, address.port, delayMs);
    return proxy;
  }

  /** Replaces the host and port of a connection string with the proxy's. */
  url(target: string): string {
    const url = new URL(target);
    url.host = `127.0.0.1:${this.port}`;
    return url.toString();
  }

  /** Ends every connection and refuses new ones until {@link heal}. */
  partition(): void {
    this.cut = true;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  heal(): void {
    this.cut = false;
  }

  async close(): Promise<void> {
    this.partition();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private pipe(client: Socket, targetPort: number): void {
    if (this.cut) {
      client.destroy();
      return;
    }
    const upstream = createConnection({ host: '127.0.0.1', port: targetPort });
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.setNoDelay(true);
      s.on('error', () => undefined);
      s.on('close', () => {
        this.sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    this.forward(client, upstream);
    this.forward(upstream, client);
  }

  /** Chunks leave in the order they came, each `delayMs` after it arrived (timers of one delay fire in order). */
  private forward(from: Socket, to: Socket): void {
    from.on('data', (chunk) => {
      const delay = this.delayMs;
      if (delay === 0) to.write(chunk);
      else setTimeout(() => to.destroyed || to.write(chunk), delay);
    });
  }
}
