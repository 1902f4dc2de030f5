import { describe, expect, it } from '@jest/globals';
import { type HttpRequestLike, requestHost, sentHeader } from '../../lib/shared/http/http-request.js';

const request = (extra: Partial<HttpRequestLike> & { headers?: HttpRequestLike['headers'] }): HttpRequestLike => ({
  method: 'POST',
  url: '/',
  headers: {},
  ...extra,
});

describe('requestHost', () => {
  it('is the routed hostname, lower case, or the Host header without its port, or empty', () => {
    expect(requestHost(request({ hostname: 'Tenant-A.Example.COM', headers: { host: 'other:1' } }))).toBe('tenant-a.example.com');
    expect(requestHost(request({ headers: { host: 'API.example.com:8443' } }))).toBe('api.example.com');
    expect(requestHost(request({ headers: { host: '[::1]:3000' } }))).toBe('[::1]');
    // Only a port at the end goes: digits after a colon elsewhere are part of the name.
    expect(requestHost(request({ headers: { host: 'a:1b.example' } }))).toBe('a:1b.example');
    expect(requestHost(request({ headers: { host: 'example.com:' } }))).toBe('example.com:');
    expect(requestHost(request({ headers: { host: 'example.com:12345' } }))).toBe('example.com');
    expect(requestHost(request({}))).toBe('');
  });
});

describe('sentHeader', () => {
  it('is the header as sent, a repeated one joined with a comma, undefined when not sent', () => {
    expect(sentHeader(request({ headers: { 'idempotency-key': 'k' } }), 'idempotency-key')).toBe('k');
    expect(sentHeader(request({ headers: { 'idempotency-key': ['a', 'b'] } }), 'idempotency-key')).toBe('a, b');
    expect(sentHeader(request({}), 'idempotency-key')).toBeUndefined();
  });
});
