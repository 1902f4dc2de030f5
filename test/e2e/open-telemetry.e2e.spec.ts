import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { context, metrics, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type HistogramMetricData,
  type MetricData,
  type SumMetricData,
} from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { type INestApplication, type MiddlewareConsumer, Module, type NestModule } from '@nestjs/common';
import request from 'supertest';
import { IdempotencyModule, InMemoryStore } from '../../lib/index.js';
import { ADAPTERS, useApps } from '../support/app.js';
import { Gate, Runs, TestController } from '../support/fixtures.js';
import { spyOnLogger } from '../support/logger.js';
import { until } from '../support/timing.js';

let seq = 0;
const newKey = (): string => `otel-${Date.now()}-${++seq}`;

// The SDKs as an application registers them before it creates its Nest app: a meter provider with an
// in-memory exporter, a tracer provider with an in-memory span exporter, and an async context manager.
const metricExporter = new InMemoryMetricExporter(AggregationTemporality.DELTA);
const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });
const spans = new InMemorySpanExporter();
const meterProvider = new MeterProvider({ readers: [reader] });
const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });

/** Starts a server span per request and makes it active, as the HTTP instrumentation does. */
function serverSpans(req: { method: string; url: string }, res: { on(e: string, f: () => void): void }, next: () => void): void {
  const span = trace.getTracer('test').startSpan(`${req.method} ${req.url}`);
  res.on('finish', () => span.end());
  context.with(trace.setSpan(context.active(), span), next);
}

@Module({ controllers: [TestController], providers: [Runs, Gate] })
class TracedModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(serverSpans).forRoutes('*path');
  }
}

async function collected(): Promise<MetricData[]> {
  metricExporter.reset();
  await reader.forceFlush();
  return metricExporter
    .getMetrics()
    .flatMap((r) => r.scopeMetrics.filter((s) => s.scope.name === 'nestjs-idempotency').flatMap((s) => s.metrics));
}

// Registered once for the file: a reader belongs to one meter provider.
beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  metrics.setGlobalMeterProvider(meterProvider);
  trace.setGlobalTracerProvider(tracer);
});
afterAll(async () => {
  metrics.disable();
  trace.disable();
  context.disable();
  // Stops the reader's export timer and the span processor.
  await meterProvider.shutdown();
  await tracer.shutdown();
});

describe.each(ADAPTERS)('OpenTelemetry on %s', (adapter) => {
  const start = useApps();
  spyOnLogger();
  let app: INestApplication;
  afterEach(() => spans.reset());
  const post = (key: string, path = '/payments', body: object = { amount: 3 }) =>
    request(app.getHttpServer()).post(path).set('Idempotency-Key', key).send(body);

  it('counts idempotency.requests by outcome, route, store and method; times store calls by operation', async () => {
    app = await start(adapter, { imports: [IdempotencyModule.forRoot(), TracedModule] });
    await collected(); // what earlier tests left: each collection holds what came since the last (delta)
    const key = newKey();
    expect((await post(key)).status).toBe(201);
    expect((await post(key)).status).toBe(201);
    expect((await post(key, '/payments', { amount: 4 })).status).toBe(422);
    expect((await post(newKey(), '/throws')).status).toBe(400);
    const all = await collected();
    const requests = all.find((m) => m.descriptor.name === 'idempotency.requests') as SumMetricData;
    expect(requests.descriptor).toMatchObject({ unit: '{request}', type: 'COUNTER' });
    const counts = requests.dataPoints
      .map((p) => [p.attributes['idempotency.outcome'], p.attributes['idempotency.route'], p.value])
      .sort((a, b) => String(a[0]).localeCompare(String(b[0])));
    expect(counts).toEqual([
      ['executed', 'TestController.create', 1],
      ['mismatch', 'TestController.create', 1],
      ['released', 'TestController.throws', 1],
      ['replayed', 'TestController.create', 1],
    ]);
    for (const p of requests.dataPoints) {
      expect(p.attributes).toMatchObject({ 'idempotency.store': 'InMemoryStore', 'http.request.method': 'POST' });
    }
    const durations = all.find((m) => m.descriptor.name === 'idempotency.store.duration') as HistogramMetricData;
    expect(durations.dataPointType).toBe(DataPointType.HISTOGRAM);
    expect(durations.descriptor.unit).toBe('ms');
    const byOperation = Object.fromEntries(
      durations.dataPoints.map((p) => [p.attributes['idempotency.store.operation'], p.value.count]),
    );
    expect(byOperation).toEqual({ claim: 4, commit: 1, release: 1 });
    for (const p of durations.dataPoints) expect(p.attributes['idempotency.store']).toBe('InMemoryStore');
    // H34 (issue 22 item 20): the conventions' unit for durations is seconds.
    const seconds = all.find((m) => m.descriptor.name === 'idempotency.store.operation.duration') as HistogramMetricData;
    expect(seconds.descriptor.unit).toBe('s');
    expect(
      Object.fromEntries(seconds.dataPoints.map((p) => [p.attributes['idempotency.store.operation'], p.value.count])),
    ).toEqual(byOperation);
    for (const p of seconds.dataPoints) expect(p.value.max!).toBeLessThan(durations.dataPoints[0].value.max! + 1);
  });

  it('sets idempotency.outcome and idempotency.replayed on the request span', async () => {
    app = await start(adapter, { imports: [IdempotencyModule.forRoot(), TracedModule] });
    const key = newKey();
    await post(key);
    await post(key);
    await post(newKey(), '/throws');
    await until(() => spans.getFinishedSpans().length === 3);
    expect(
      spans.getFinishedSpans().map((s) => [s.attributes['idempotency.outcome'], s.attributes['idempotency.replayed']]),
    ).toEqual([
      ['executed', false],
      ['replayed', true],
      ['released', false],
    ]);
  });

  it('times a failed claim under its operation, with error.type from the driver code, and answers 503', async () => {
    class DownStore extends InMemoryStore {
      override claim(): Promise<never> {
        return Promise.reject(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
      }
    }
    app = await start(adapter, { imports: [IdempotencyModule.forRoot({ store: new DownStore() }), TracedModule] });
    await collected();
    expect((await post(newKey())).status).toBe(503);
    const seconds = (await collected()).find(
      (m) => m.descriptor.name === 'idempotency.store.operation.duration',
    ) as HistogramMetricData;
    expect(
      seconds.dataPoints.map((p) => [p.attributes['idempotency.store.operation'], p.attributes['error.type'], p.value.count]),
    ).toEqual([['claim', 'ECONNREFUSED', 1]]);
  });

  it('records nothing with openTelemetry: false', async () => {
    app = await start(adapter, { imports: [IdempotencyModule.forRoot({ openTelemetry: false }), TracedModule] });
    await collected();
    await post(newKey());
    expect((await collected()).flatMap((m): unknown[] => m.dataPoints)).toEqual([]);
    await until(() => spans.getFinishedSpans().length === 1);
    expect(spans.getFinishedSpans()[0].attributes['idempotency.outcome']).toBeUndefined();
  });
});
