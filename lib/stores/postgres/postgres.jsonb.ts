/** An escape `jsonb` refuses: NUL, or a UTF-16 surrogate (JSON.stringify writes only lone ones as escapes). */
const REFUSED = /\\u(?:0000|d[89a-f])/i;

/** A NUL, or a surrogate not in a pair. */
const UNSTORABLE = /\0|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function wellFormed(text: string): string {
  return text.replace(UNSTORABLE, '\uFFFD');
}

function cleaned(value: unknown): unknown {
  if (typeof value === 'string') return wellFormed(value);
  if (Array.isArray(value)) return value.map(cleaned);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).map(([key, inner]) => [wellFormed(key), cleaned(inner)]));
}

/**
 * JSON text `jsonb` takes: `json` itself, or (when it holds a NUL or a lone surrogate, which `jsonb`
 * refuses) the same value with those characters replaced by U+FFFD. Only for the `results` and
 * `input` columns pods of earlier releases read; this release reads the exact text beside them.
 * A backslash before `u0000` matches too: a needless round of parsing, never a wrong answer.
 */
export function jsonbSafe(json: string): string {
  return REFUSED.test(json) ? JSON.stringify(cleaned(JSON.parse(json))) : json;
}
