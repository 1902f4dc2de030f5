import { describe, expect, it } from '@jest/globals';
import { errorType, type OpenTelemetryApi, Telemetry } from '../../lib/core/events/telemetry.js';

/** Records what the module asks of the OpenTelemetry API: the instruments it creates and what they get. */
function recordingApi(span?: { recording: boolean; attributes: object[] }) {
  const created: [string, string, object][] = [];
  const points: [string, number, object][] = [];
  const api: OpenTelemetryApi = {
    metrics: {
      getMeter: (name) => ({
        createCounter: (instrument, options) => {
          created.push([name, instrument, options]);
          return { add: (value, attributes) => void points.push([instrument, value, attributes]) };
        },
        createHistogram: (instrument, options) => {
          created.push([name, instrument, options]);
          return { record: (value, attributes) => void points.push([instrument, value, attributes]) };
        },
      }),
    },
    trace: {
      getActiveSpan: () =>
        span && { isRecording: () => span.recording, setAttributes: (attributes) => void span.attributes.push(attributes) },
    },
  };
  return { api, created, points };
}

describe('Telemetry', () => {
  it('creates the counter and the histogram under the nestjs-idempotency meter, with units, descriptions and ms buckets', () => {
    const { api, created } = recordingApi();
    new Telemetry(api);
    expect(created).toEqual([
      [
        'nestjs-idempotency',
        'idempotency.requests',
        { description: 'Requests to @Idempotent() routes by outcome, and the lease-lost and evicted events', unit: '{request}' },
      ],
      [
        'nestjs-idempotency',
        'idempotency.store.operation.duration',
        {
          description: 'Duration of idempotency store calls',
          unit: 's',
          advice: {
            explicitBucketBoundaries: [
              0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
            ],
          },
        },
      ],
      [
        'nestjs-idempotency',
        'idempotency.store.duration',
        {
          description: 'Deprecated: use idempotency.store.operation.duration (seconds, with error.type)',
          unit: 'ms',
          advice: { explicitBucketBoundaries: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000] },
        },
      ],
    ]);
  });

  it('an outcome without a route or method has no such attribute at all, not an undefined one', () => {
    const { api, points } = recordingApi();
    new Telemetry(api).outcome('evicted', undefined, undefined, 'InMemoryStore');
    expect(Object.keys(points[0][2]).sort()).toEqual(['idempotency.outcome', 'idempotency.store']);
  });

  it("names a failure by the driver's code when it is a non-empty string, else by the error's class", () => {
    expect(errorType(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }))).toBe('ECONNREFUSED');
    expect(errorType(Object.assign(new TypeError('x'), { code: '' }))).toBe('TypeError');
    expect(errorType(Object.assign(new RangeError('x'), { code: 57 }))).toBe('RangeError');
    expect(errorType({ code: 57 })).toBe('_OTHER');
    expect(errorType(null)).toBe('_OTHER');
    expect(errorType(undefined)).toBe('_OTHER');
  });

  it('counts an outcome with the route and method it has, and none it has not', () => {
    const { api, points } = recordingApi();
    const telemetry = new Telemetry(api);
    telemetry.outcome('replayed', 'Pay.create', 'POST', 'RedisStore');
    telemetry.outcome('evicted', undefined, undefined, 'InMemoryStore');
    telemetry.storeDuration('renew', 'RedisStore', 1.25);
    telemetry.storeDuration('claim', 'PostgresStore', 1000, Object.assign(new Error('x'), { code: '57014' }));
    telemetry.storeDuration('commit', 'RedisStore', 2, new TypeError('y'));
    telemetry.storeDuration('commit', 'RedisStore', 2, 'a string');
    expect(points).toEqual([
      [
        'idempotency.requests',
        1,
        {
          'idempotency.outcome': 'replayed',
          'idempotency.store': 'RedisStore',
          'idempotency.route': 'Pay.create',
          'http.request.method': 'POST',
        },
      ],
      ['idempotency.requests', 1, { 'idempotency.outcome': 'evicted', 'idempotency.store': 'InMemoryStore' }],
      ['idempotency.store.duration', 1.25, { 'idempotency.store.operation': 'renew', 'idempotency.store': 'RedisStore' }],
      [
        'idempotency.store.operation.duration',
        0.00125,
        { 'idempotency.store.operation': 'renew', 'idempotency.store': 'RedisStore' },
      ],
      ['idempotency.store.duration', 1000, { 'idempotency.store.operation': 'claim', 'idempotency.store': 'PostgresStore' }],
      [
        'idempotency.store.operation.duration',
        1,
        { 'idempotency.store.operation': 'claim', 'idempotency.store': 'PostgresStore', 'error.type': '57014' },
      ],
      ['idempotency.store.duration', 2, { 'idempotency.store.operation': 'commit', 'idempotency.store': 'RedisStore' }],
      [
        'idempotency.store.operation.duration',
        0.002,
        { 'idempotency.store.operation': 'commit', 'idempotency.store': 'RedisStore', 'error.type': 'TypeError' },
      ],
      ['idempotency.store.duration', 2, { 'idempotency.store.operation': 'commit', 'idempotency.store': 'RedisStore' }],
      [
        'idempotency.store.operation.duration',
        0.002,
        { 'idempotency.store.operation': 'commit', 'idempotency.store': 'RedisStore', 'error.type': '_OTHER' },
      ],
    ]);
  });

  it('marks the active span only while it records', () => {
    const span = { recording: true, attributes: [] as object[] };
    const telemetry = new Telemetry(recordingApi(span).api);
    telemetry.mark('replayed');
    telemetry.mark('conflict');
    span.recording = false;
    telemetry.mark('executed');
    expect(span.attributes).toEqual([
      { 'idempotency.outcome': 'replayed', 'idempotency.replayed': true },
      { 'idempotency.outcome': 'conflict', 'idempotency.replayed': false },
    ]);
    new Telemetry(recordingApi().api).mark('executed'); // no active span: nothing to do
  });
});
