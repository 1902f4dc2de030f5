import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Sends one HTTP/1.1 request byte for byte over a socket to 127.0.0.1, so tests can put bytes in a
 * header that Node's own HTTP client refuses to send (control characters).
 */
export function rawRequest(
  port: number,
  method: string,
  path: string,
  headers: [string, string][],
  body = '',
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(new Error('raw request timed out')), 5000);
    socket.on('data', (d) => chunks.push(d));
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('latin1');
      const [head, ...rest] = text.split('\r\n\r\n');
      const [statusLine, ...lines] = head.split('\r\n');
      const parsed: Record<string, string> = {};
      for (const line of lines) {
        const i = line.indexOf(':');
        parsed[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers: parsed, body: rest.join('\r\n\r\n') });
    });
    const head = [
      `${method} ${path} HTTP/1.1`,
      'Host: 127.0.0.1',
      'Connection: close',
      `Content-Length: ${Buffer.byteLength(body)}`,
      ...(body ? ['Content-Type: application/json'] : []),
      ...headers.map(([k, v]) => `${k}: ${v}`),
    ].join('\r\n');
    socket.write(Buffer.from(`${head}\r\n\r\n${body}`, 'latin1'));
  });
}
