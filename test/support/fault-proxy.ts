import { createConnection, createServer, type Server, type Socket } from 'node:net';

/** Delay added to every chunk in one direction: `delayMs` plus up to `jitterMs` at random. */
export interface Latency {
  delayMs: number;
  jitterMs: number;
}

/** A direction of the proxy: `up` from the client (the app) to the server (the store), `down` back. */
export type Direction = 'up' | 'down';

interface Queued {
  chunk: Buffer;
  dueAt: number;
}

/** One direction of one proxied connection: chunks leave in the order they came, each once due. */
class Lane {
  private readonly queue: Queued[] = [];
  private timer: NodeJS.Timeout | undefined;
  private lastDue = 0;

  constructor(
    private readonly proxy: FaultProxy,
    private readonly direction: Direction,
    private readonly to: Socket,
  ) {}

  push(chunk: Buffer): void {
    const { delayMs, jitterMs } = this.proxy.latency[this.direction];
    // Never before the chunk ahead of it: jitter delays, it does not reorder a TCP stream.
    const dueAt = Math.max(this.lastDue, Date.now() + delayMs + Math.random() * jitterMs);
    this.lastDue = dueAt;
    this.queue.push({ chunk, dueAt });
    this.pump();
  }

  pump(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.proxy.stalled[this.direction]) return;
    while (this.queue.length > 0 && this.queue[0].dueAt <= Date.now()) {
      const { chunk } = this.queue.shift()!;
      if (!this.to.destroyed) this.to.write(chunk);
    }
    if (this.queue.length > 0) this.timer = setTimeout(() => this.pump(), this.queue[0].dueAt - Date.now());
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.queue.length = 0;
  }
}

/**
 * A loopback TCP proxy in front of a server (PostgreSQL, Redis) for the tests that put faults
 * between an app and its store. Per direction: latency with jitter (the store "in another zone"),
 * and a stall (bytes held, connections kept open: a hung network path). For every connection: a
 * partition (every connection cut, new ones refused until healed), or one connection dropped.
 */
export class FaultProxy {
  readonly latency: Record<Direction, Latency>;
  readonly stalled: Record<Direction, boolean> = { up: false, down: false };
  private readonly connections = new Set<{ sockets: Socket[]; lanes: Lane[] }>();
  private cut = false;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    delayMs: number,
  ) {
    this.latency = { up: { delayMs, jitterMs: 0 }, down: { delayMs, jitterMs: 0 } };
  }

  /** A proxy on a free loopback port, forwarding to `targetPort` with `delayMs` each way. */
  static async start(targetPort: number, delayMs = 0): Promise<FaultProxy> {
    // eslint-disable-next-line prefer-const -- assigned once the server knows its port
    let proxy: FaultProxy;
    const server = createServer((client) => proxy.pipe(client, targetPort));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (!address || typeof address === 'string') throw new Error('no address');
    proxy = new FaultProxy(server, address.port, delayMs);
    return proxy;
  }

  /** Replaces the host and port of a connection string with the proxy's. */
  url(target: string): string {
    const url = new URL(target);
    url.host = `127.0.0.1:${this.port}`;
    return url.toString();
  }

  /** Sets the latency of both directions, or of one. */
  delay(latency: Latency, direction?: Direction): void {
    for (const d of direction ? [direction] : (['up', 'down'] as const)) this.latency[d] = { ...latency };
  }

  /** Holds every byte in one direction (or both), connections open, until {@link resume}. */
  stall(direction?: Direction): void {
    for (const d of direction ? [direction] : (['up', 'down'] as const)) this.stalled[d] = true;
  }

  /** Sends what a stall held, in order, and lets bytes through again. */
  resume(): void {
    this.stalled.up = this.stalled.down = false;
    for (const c of this.connections) for (const lane of c.lanes) lane.pump();
  }

  /** Ends every connection and refuses new ones until {@link heal}. */
  partition(): void {
    this.cut = true;
    for (const c of [...this.connections]) this.drop(c);
  }

  heal(): void {
    this.cut = false;
  }

  /** Ends one open connection (the oldest), as a reset on the path would; false when none is open. */
  dropOne(): boolean {
    const first = this.connections.values().next();
    if (first.done) return false;
    this.drop(first.value);
    return true;
  }

  get open(): number {
    return this.connections.size;
  }

  async close(): Promise<void> {
    this.partition();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private drop(connection: { sockets: Socket[]; lanes: Lane[] }): void {
    this.connections.delete(connection);
    for (const lane of connection.lanes) lane.stop();
    for (const s of connection.sockets) s.destroy();
  }

  private pipe(client: Socket, targetPort: number): void {
    if (this.cut) {
      client.destroy();
      return;
    }
    const upstream = createConnection({ host: '127.0.0.1', port: targetPort });
    const up = new Lane(this, 'up', upstream);
    const down = new Lane(this, 'down', client);
    const connection = { sockets: [client, upstream], lanes: [up, down] };
    this.connections.add(connection);
    for (const s of connection.sockets) {
      s.setNoDelay(true);
      s.on('error', () => undefined);
      s.on('close', () => this.drop(connection));
    }
    client.on('data', (chunk: Buffer) => up.push(chunk));
    upstream.on('data', (chunk: Buffer) => down.push(chunk));
  }
}
