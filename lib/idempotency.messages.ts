/**
 * Every sentence a client can read in an error body. None of them holds a byte the client sent:
 * they name the header, a limit or an index, never the key, the body or a media type.
 */
export const MESSAGES = {
  missing: (header: string) => `${header} header is required`,
  tooLong: (what: string, max: number) => `${what} exceeds ${max} characters`,
  forbiddenChar: (what: string, index: number) => `${what} has a control character or space at index ${index}`,
  inFlight: (header: string) => `${header} in-flight; retry shortly`,
  reused: (header: string) => `${header} was already used for a different request`,
  tooDeep: 'request body is nested too deeply',
  unreadBody:
    'request body is read by no body parser, so it cannot be checked against the key; register a parser for its media type (e.g. app.useBodyParser(\'text\'))',
  unavailable: 'idempotency store unavailable; retry shortly',
  noScope: 'the caller scope of this request could not be resolved',
} as const;

/** Logged by every store that finds a value under an idempotency key it did not write. */
export const FOREIGN_VALUE = 'a value the idempotency layer did not write was under an idempotency key; it is replaced by a claim';
