import { afterAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { post } from '../support/pod.js';

// The load suites' client (test/support/pod.ts): a kept-alive socket the server drops as idle just as
// the client reuses it is the race that failed a CI run with "socket hang up".
describe('the load client', () => {
  const served = new WeakMap<Socket, number>();
  let requests = 0;
  // Answers the first request of each connection; drops the connection on its second, unread, as a
  // server closing an idle socket does.
  const server: Server = createServer((req, res) => {
    const n = (served.get(req.socket) ?? 0) + 1;
    served.set(req.socket, n);
    if (n > 1) return void req.socket.destroy();
    requests++;
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  afterAll(() => new Promise<void>((done) => server.close(() => done())));

  it('sends a request again, once, on a fresh socket when a reused one is reset unread', async () => {
    await new Promise<void>((ready) => server.listen(0, '127.0.0.1', ready));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    expect((await post(url, '{}', {})).text).toBe('ok');
    expect((await post(url, '{}', {})).text).toBe('ok');
    expect(requests).toBe(2);
  });
});
