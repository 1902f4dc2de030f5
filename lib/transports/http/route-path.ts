/** A pattern's segments: a static one as the route spells it, `undefined` for a `:param`. */
type Template = readonly (string | undefined)[];

/** A static segment, or a plain `:name` parameter; anything else (wildcards, optional parts, regular expressions) is neither. */
const STATIC = /^[^:*?(){}[\]+\\]*$/;
const PARAM = /^:[A-Za-z_$][\w$]*$/;

/** One entry per route pattern (patterns come from code, never from a client): parsed once. */
const templates = new Map<string, Template | null>();

function segments(path: string): string[] {
  const parts = path.split('/');
  if (parts.length > 2 && parts[parts.length - 1] === '') parts.pop();
  return parts;
}

function templateOf(pattern: string): Template | null {
  let template = templates.get(pattern);
  if (template === undefined) {
    const parts = segments(pattern);
    template = parts.every((part) => STATIC.test(part) || PARAM.test(part))
      ? parts.map((part) => (PARAM.test(part) ? undefined : part))
      : null;
    templates.set(pattern, template);
  }
  return template;
}

/**
 * The request's path as its route spells it: a spelling the router took for the route (another
 * case, a trailing slash) is the route's own path, with each parameter as the client sent it. So
 * `/api/PLAIN/` and `/api/plain` are one request, `/orders/A7` and `/orders/a7` two. A path the
 * pattern cannot spell (wildcards, optional parts, regular expressions) is taken as it came.
 */
export function routedPath(path: string, pattern: string): string {
  const template = templateOf(pattern);
  if (!template) return path;
  const parts = segments(path);
  if (parts.length !== template.length) return path;
  return parts.map((part, i) => template[i] ?? part).join('/');
}
