/**
 * Where the interceptor leaves the validated key for `@IdempotencyKey()`: beside the request, not on
 * it. A property added to every request gives it a hidden class of its own, which costs each request
 * more than the lookup, and nothing a framework or app puts on the request can clash with it.
 */
const keys = new WeakMap<object, string>();

export function rememberKey(request: object, key: string): void {
  keys.set(request, key);
}

/** The key the interceptor accepted for `request`; `undefined` when it let the request pass without one. */
export function keyOf(request: object): string | undefined {
  return keys.get(request);
}
