import type { ServerResponse } from 'node:http';

/**
 * The slice of Node's `ServerResponse` the recorder and the filter touch, recording every call, for
 * unit tests that need to see exactly what reached the response (and when) without a socket.
 */
export class FakeResponse {
  statusCode = 200;
  readonly calls: { method: 'writeHead' | 'write' | 'end'; args: unknown[] }[] = [];
  private readonly headers: Record<string, unknown> = {};

  setHeader(name: string, value: unknown): this {
    this.headers[name.toLowerCase()] = value;
    return this;
  }
  getHeader(name: string): unknown {
    return this.headers[name.toLowerCase()];
  }
  getHeaders(): Record<string, unknown> {
    return { ...this.headers };
  }
  getHeaderNames(): string[] {
    return Object.keys(this.headers);
  }
  removeHeader(name: string): void {
    delete this.headers[name.toLowerCase()];
  }
  writeHead(status: number, ...rest: unknown[]): this {
    this.statusCode = status;
    this.calls.push({ method: 'writeHead', args: [status, ...rest] });
    return this;
  }
  write(...args: unknown[]): boolean {
    this.calls.push({ method: 'write', args });
    return true;
  }
  end(...args: unknown[]): this {
    this.calls.push({ method: 'end', args });
    return this;
  }

  get headersSent(): boolean {
    return this.calls.some((c) => c.method !== 'write' || c.args.length > 0);
  }

  /** Typed as what production code expects. */
  get raw(): ServerResponse {
    return this as unknown as ServerResponse;
  }
  ended(): boolean {
    return this.calls.some((c) => c.method === 'end');
  }
}
