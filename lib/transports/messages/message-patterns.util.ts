import {
  NEST_EVENT_HANDLER,
  NEST_PATTERN_HANDLER_METADATA,
  NEST_PATTERN_METADATA,
  NEST_RMQ_TRANSPORT,
  NEST_TRANSPORT_METADATA,
} from '../../shared/idempotency.constants.js';

/** A pattern as one string: a string or number as it is, an object as JSON with its keys sorted at every level. */
function route(pattern: unknown): string {
  if (pattern === null || typeof pattern !== 'object') return String(pattern);
  if (Array.isArray(pattern)) return `[${pattern.map(route).join(',')}]`;
  const entries = Object.keys(pattern)
    .sort()
    .map((key) => {
      const value = (pattern as Record<string, unknown>)[key];
      return `${JSON.stringify(key)}:${typeof value === 'string' ? JSON.stringify(value) : route(value)}`;
    });
  return `{${entries.join(',')}}`;
}

/**
 * The patterns under which Nest chains `handler` with the other handlers of the same event on one
 * RabbitMQ delivery: an `@EventPattern()` for RabbitMQ or for every transport. A `@MessagePattern()`
 * has one handler per pattern, so none.
 */
export function chainedHandlers(handler: object): string[] {
  if (Reflect.getMetadata(NEST_PATTERN_HANDLER_METADATA, handler) !== NEST_EVENT_HANDLER) return [];
  const transport: unknown = Reflect.getMetadata(NEST_TRANSPORT_METADATA, handler);
  if (transport !== undefined && transport !== NEST_RMQ_TRANSPORT) return [];
  const patterns = (Reflect.getMetadata(NEST_PATTERN_METADATA, handler) ?? []) as unknown[];
  return [...new Set(patterns.map(route))];
}

/** The pattern a delivery came with, as {@link chainedHandlers} writes it: Nest's RabbitMQ server hands an object pattern over as JSON. */
export function deliveredPattern(pattern: unknown): string {
  if (typeof pattern !== 'string') return route(pattern);
  try {
    return route(JSON.parse(pattern));
  } catch {
    return pattern;
  }
}
