import { IdempotencyException } from '../../shared/exceptions/idempotency.exception.js';
import { errorResponse } from '../../shared/exceptions/error.response.js';
import { MESSAGES, OPENAPI } from '../../shared/messages/client.messages.js';
import type { ResolvedIdempotencyOptions, ResolvedRouteOptions } from '../../shared/interfaces/resolved-options.interface.js';

/** An OpenAPI 3 header object, as a response lists it. */
export interface HeaderDoc {
  readonly description: string;
  readonly schema: Readonly<Record<string, unknown>>;
}

/** One of the module's own error responses, documented. */
export interface ErrorDoc {
  readonly status: number;
  readonly description: string;
  readonly headers: Readonly<Record<string, HeaderDoc>>;
  /** Media type → schema and example, as the module sends it (`errorFormat`, `errorBody`). */
  readonly content: Readonly<Record<string, { schema?: object; example: unknown }>>;
}

/** What an `@Idempotent()` route adds to its OpenAPI operation. */
export interface RouteDoc {
  /** The key header parameter. */
  readonly header: {
    readonly name: string;
    readonly required: boolean;
    readonly description: string;
    readonly schema: Readonly<Record<string, unknown>>;
    readonly example: string;
  };
  /** The policy, for the operation's description (the draft: "publish your policy", with expiry). */
  readonly policy: string;
  readonly errors: readonly ErrorDoc[];
  /** Headers every success response may carry: the replay mark, the echoed key. */
  readonly successHeaders: Readonly<Record<string, HeaderDoc>>;
  /** Headers an error response carries besides its own: the echoed key. */
  readonly errorHeaders: Readonly<Record<string, HeaderDoc>>;
}

/** `idempotency-key` → `Idempotency-Key`: how documents and clients spell header names. */
export function displayName(header: string): string {
  return header.replace(/(^|-)([a-z])/g, (_m, dash: string, c: string) => dash + c.toUpperCase());
}

const UNITS: readonly [number, string][] = [
  [86_400_000, 'day'],
  [3_600_000, 'hour'],
  [60_000, 'minute'],
  [1000, 'second'],
  [1, 'millisecond'],
];

/** `86_400_000` → `1 day`, `5_400_000` → `90 minutes`: the largest unit that divides it. */
export function duration(ms: number): string {
  const [size, unit] = UNITS.find(([u]) => ms % u === 0)!;
  const n = ms / size;
  return `${n} ${unit}${n === 1 ? '' : 's'}`;
}

// Every character the key rules let through: none of the control range, no space, no DEL.
const KEY_PATTERN = '^[^\\u0000-\\u0020\\u007F]+$';

const JSON_SCHEMA = { type: 'object', required: ['error'], properties: { error: { type: 'string' } } };
const PROBLEM_SCHEMA = {
  type: 'object',
  required: ['type', 'title', 'status', 'detail'],
  properties: {
    type: { type: 'string', format: 'uri-reference' },
    title: { type: 'string' },
    status: { type: 'integer' },
    detail: { type: 'string' },
  },
};

/** What `@Idempotent()` adds to a route's operation, built from the options it runs with. */
export function routeDoc(options: ResolvedIdempotencyOptions, route: ResolvedRouteOptions): RouteDoc {
  const header = displayName(options.headerName);
  const required = route.missingHeader === 'reject';
  const expiry = duration(route.ttlMs);
  const replayed = options.replayedHeader === false ? false : displayName(options.replayedHeader);
  const echo: Record<string, HeaderDoc> = options.echoKeyHeader
    ? { [header]: { description: OPENAPI.echo, schema: { type: 'string' } } }
    : {};
  const retryAfter = { 'Retry-After': { description: OPENAPI.retryAfter, schema: { type: 'integer', minimum: 0 } } };
  // The examples are what the module sends: the same function writes them.
  const error = (status: number, description: string, sample: IdempotencyException): ErrorDoc => {
    const sent = errorResponse(sample, options);
    const mediaType = String(sent.headers['content-type']).split(';')[0];
    const schema = options.errorBody ? undefined : options.errorFormat === 'json' ? JSON_SCHEMA : PROBLEM_SCHEMA;
    const example: unknown = JSON.parse(sent.body.toString('utf8'));
    return {
      status,
      description,
      headers: 'retry-after' in sample.headers ? retryAfter : {},
      content: { [mediaType]: schema ? { schema, example } : { example } },
    };
  };
  const name = options.headerName;
  const successHeaders: Record<string, HeaderDoc> = { ...echo };
  if (replayed) successHeaders[replayed] = { description: OPENAPI.replayed, schema: { type: 'string', enum: ['true'] } };
  return {
    header: {
      name: header,
      required,
      description: OPENAPI.keyHeader(expiry),
      schema: { type: 'string', minLength: 1, maxLength: options.maxKeyLength, pattern: KEY_PATTERN },
      example: '8e03978e-40d5-43e8-bc93-6894a57f9324',
    },
    policy: [OPENAPI.policy(header, required, expiry, replayed), options.replayFlag === 'header' ? '' : OPENAPI.replayedBody]
      .filter(Boolean)
      .join(' '),
    errors: [
      error(
        400,
        required ? OPENAPI.keyRequired : OPENAPI.keyOptional,
        required
          ? IdempotencyException.of('key-missing', MESSAGES.missing(name))
          : IdempotencyException.of('key-invalid', MESSAGES.tooLong(name, options.maxKeyLength)),
      ),
      error(409, OPENAPI.inFlight, IdempotencyException.of('key-in-flight', MESSAGES.inFlight(name))),
      error(422, OPENAPI.reused, IdempotencyException.of('key-reused', MESSAGES.reused(name))),
      error(503, OPENAPI.unavailable, IdempotencyException.of('store-unavailable', MESSAGES.unavailable)),
    ],
    successHeaders,
    errorHeaders: echo,
  };
}
