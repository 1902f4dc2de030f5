/** Where the interceptor leaves an `atomicPhases` run for `@Phases()`: beside the request, as the key is. */
const runs = new WeakMap<object, object>();

export function rememberRun(request: object, run: object): void {
  runs.set(request, run);
}

/** The run of `request`; `undefined` unless its route has `atomicPhases: true` and the key was claimed. */
export function runOf(request: object): object | undefined {
  return runs.get(request);
}
