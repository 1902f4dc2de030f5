/** How far a value is walked for a type JSON changes: deep and wide enough for a result, bounded for any. */
const MAX_DEPTH = 8;
const MAX_NODES = 500;

/** What JSON makes of a value that is not plain data, by what it is; `undefined` for plain data. */
function lossy(value: unknown): string | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : `${String(value)} (read back as null)`;
  if (value === null || typeof value !== 'object') return undefined;
  if (value instanceof Date) return 'a Date (read back as its string)';
  if (value instanceof Map || value instanceof Set) return `a ${value.constructor.name} (read back as {})`;
  if (Buffer.isBuffer(value)) return "a Buffer (read back as { type: 'Buffer', data })";
  const proto = Object.getPrototypeOf(value) as object | null;
  if (proto !== null && proto !== Object.prototype && !Array.isArray(value)) {
    return `an instance of ${(value.constructor as { name?: string } | undefined)?.name || 'a class'} (read back as a plain object)`;
  }
  return undefined;
}

/**
 * The first part of `value` (a work's result) that a duplicate reads back as something else, named
 * by its type; `undefined` when it all comes back the same. Looks at most {@link MAX_NODES} values
 * {@link MAX_DEPTH} deep: a warning, not a guarantee.
 */
export function lossyPart(value: unknown): string | undefined {
  const stack: [unknown, number][] = [[value, 0]];
  for (let seen = 0; stack.length > 0 && seen < MAX_NODES; seen++) {
    const [next, depth] = stack.pop()!;
    const found = lossy(next);
    if (found) return found;
    if (next === null || typeof next !== 'object' || depth >= MAX_DEPTH) continue;
    for (const child of Object.values(next)) stack.push([child, depth + 1]);
  }
  return undefined;
}
