import { describe, expect, it } from '@jest/globals';
import { requestTarget } from '../../lib/transports/http/request.reader.js';
import { routedPath } from '../../lib/transports/http/route-path.js';

describe('routedPath', () => {
  it("spells a path as its route does: the route's static segments, the client's parameters, no trailing slash", () => {
    expect(routedPath('/API/Plain/', '/api/plain')).toBe('/api/plain');
    expect(routedPath('/api/ORDERS/A7/pay/', '/api/orders/:id/pay')).toBe('/api/orders/A7/pay');
    expect(routedPath('/a/B/c', '/a/:first_$/:second')).toBe('/a/B/c');
    expect(routedPath('/', '/')).toBe('/');
    expect(routedPath('//', '/')).toBe('/');
    expect(routedPath('/X/', '/x')).toBe('/x');
  });

  it('takes the path as it came when the pattern cannot spell it, or has another number of segments', () => {
    for (const pattern of ['/files/*path', '/a{/:b}', '/n/:id(\\d+)', '/a/:b?', '/x/:a-:b', '/p/+', '/q/[x]', '/r/\\:s']) {
      expect(routedPath('/ANY/Thing', pattern)).toBe('/ANY/Thing');
    }
    expect(routedPath('/api/plain/extra', '/api/plain')).toBe('/api/plain/extra');
    expect(routedPath('/api', '/api/plain')).toBe('/api');
    expect(routedPath('/api/plain//', '/api/plain')).toBe('/api/plain//');
  });
});

describe('requestTarget', () => {
  const base = { method: 'POST', headers: {} };

  it("is the URL as received without a route; with one, its path spelled as the route's and the query kept", () => {
    expect(requestTarget({ ...base, url: '/A/?q=1' })).toBe('/A/?q=1');
    expect(requestTarget({ ...base, url: '/in', originalUrl: '/Mount/In/?q=1', baseUrl: '/mount', route: { path: '/in' } })).toBe(
      '/mount/in?q=1',
    );
    expect(requestTarget({ ...base, url: '/A/', routeOptions: { url: '/a' } })).toBe('/a');
    expect(requestTarget({ ...base, url: '/a?x', routeOptions: { url: '/a' } })).toBe('/a?x');
    expect(requestTarget({ ...base, url: '/A', route: { path: /a/ }, routeOptions: { url: '/a' } })).toBe('/a');
    expect(requestTarget({ ...base, url: '/A', route: {} })).toBe('/A');
  });
});
