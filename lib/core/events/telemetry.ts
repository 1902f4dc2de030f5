import type { IdempotencyOutcome } from '../../shared/interfaces/idempotency-event.interface.js';
import { importOptional } from '../../shared/utils/optional-peer.util.js';

/** The parts of `@opentelemetry/api` 1.x used here, typed here: its types must not leak into this package's. */
export interface OpenTelemetryApi {
  metrics: { getMeter(name: string, version?: string): Meter };
  trace: { getActiveSpan(): Span | undefined };
}
type Attributes = Record<string, string | boolean>;
interface Meter {
  createCounter(name: string, options: object): { add(value: number, attributes: Attributes): void };
  createHistogram(name: string, options: object): { record(value: number, attributes: Attributes): void };
}
interface Span {
  isRecording(): boolean;
  setAttributes(attributes: Attributes): unknown;
}

/** A store call the duration histogram tells apart. */
export type StoreOperation = 'claim' | 'commit' | 'release' | 'renew';

/** The meter's name: the instrumentation scope the metrics appear under. */
export const METER_NAME = 'nestjs-idempotency';
/** Names and attributes of what is exported, in OpenTelemetry's semantic-convention style. */
export const METRICS = {
  requests: 'idempotency.requests',
  /** In seconds, as the semantic conventions measure durations; with `error.type` on a failed call. */
  operationDuration: 'idempotency.store.operation.duration',
  /** Deprecated: the same in ms, without `error.type`; kept for one minor release (see docs/guides/operations.md). */
  storeDuration: 'idempotency.store.duration',
  errorType: 'error.type',
  outcome: 'idempotency.outcome',
  route: 'idempotency.route',
  store: 'idempotency.store',
  operation: 'idempotency.store.operation',
  method: 'http.request.method',
  replayed: 'idempotency.replayed',
} as const;
/** Store round trips take from under a millisecond (in memory) to a timeout (seconds). */
const DURATION_BUCKETS_MS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000];
const DURATION_BUCKETS_S = DURATION_BUCKETS_MS.map((ms) => ms / 1000);

/**
 * What `error.type` says of a failed store call: the driver's error code when it has one (an
 * SQLSTATE, `ECONNREFUSED`), else the error's class name; low in cardinality, as the conventions ask.
 */
export function errorType(err: unknown): string {
  const code = (err as { code?: unknown } | null | undefined)?.code;
  if (typeof code === 'string' && code !== '') return code;
  return err instanceof Error ? err.name : '_OTHER';
}

/**
 * Counts outcomes and times store calls through the global OpenTelemetry API, and marks the active
 * span. Without an SDK registered the API's instruments do nothing and there is no active span.
 */
export class Telemetry {
  private readonly requests;
  private readonly durations;
  private readonly operations;

  constructor(private readonly api: OpenTelemetryApi) {
    const meter = api.metrics.getMeter(METER_NAME);
    this.requests = meter.createCounter(METRICS.requests, {
      description: 'Requests to @Idempotent() routes by outcome, and the lease-lost and evicted events',
      unit: '{request}',
    });
    this.operations = meter.createHistogram(METRICS.operationDuration, {
      description: 'Duration of idempotency store calls',
      unit: 's',
      advice: { explicitBucketBoundaries: DURATION_BUCKETS_S },
    });
    this.durations = meter.createHistogram(METRICS.storeDuration, {
      description: `Deprecated: use ${METRICS.operationDuration} (seconds, with error.type)`,
      unit: 'ms',
      advice: { explicitBucketBoundaries: DURATION_BUCKETS_MS },
    });
  }

  outcome(outcome: IdempotencyOutcome, route: string | undefined, method: string | undefined, store: string): void {
    const attributes: Attributes = { [METRICS.outcome]: outcome, [METRICS.store]: store };
    if (route !== undefined) attributes[METRICS.route] = route;
    if (method !== undefined) attributes[METRICS.method] = method;
    this.requests.add(1, attributes);
  }

  /** Sets the outcome on the request's span while it is still open; `lease-lost` and `evicted` are not a request's. */
  mark(outcome: IdempotencyOutcome): void {
    const span = this.api.trace.getActiveSpan();
    if (span?.isRecording()) span.setAttributes({ [METRICS.outcome]: outcome, [METRICS.replayed]: outcome === 'replayed' });
  }

  /** Records a store call; `error` when it failed (thrown or timed out). */
  storeDuration(operation: StoreOperation, store: string, ms: number, error?: unknown): void {
    const attributes: Attributes = { [METRICS.operation]: operation, [METRICS.store]: store };
    this.durations.record(ms, attributes);
    this.operations.record(
      ms / 1000,
      error === undefined ? attributes : { ...attributes, [METRICS.errorType]: errorType(error) },
    );
  }
}

/** `@opentelemetry/api` when it is installed; `undefined` when not (nothing is loaded then). */
export function loadOpenTelemetry(
  failed: (reason: string) => void,
  load: () => Promise<OpenTelemetryApi> = () => import('@opentelemetry/api'),
): Promise<OpenTelemetryApi | undefined> {
  return importOptional('@opentelemetry/api', load, failed);
}
