import type { IdempotencyErrorCode } from '../interfaces/idempotency-error.interface.js';

// What a client reads: error bodies, problem titles and the OpenAPI document. None carries a byte a client sent.

/** What a client reads in an error body: the header (as configured), a limit or an index, never a byte it sent. */
export const MESSAGES = {
  missing: (header: string) => `${header} header is required`,
  tooLong: (what: string, max: number) => `${what} exceeds ${max} characters`,
  malformed: (header: string) =>
    `${header} starts with a quote but is not a valid Structured Field String (RFC 9651): unterminated, a bad escape, or something after the closing quote`,
  forbiddenChar: (what: string, index: number) =>
    `${what} has a control character, a space or an invisible character at index ${index}`,
  inFlight: (header: string) => `${header} in-flight; retry shortly`,
  messageKey:
    'the message has no idempotency key: give it a message id (RabbitMQ messageId, NATS Nats-Msg-Id) or data.idempotencyKey, or read it with keyFrom',
  messageInFlight: 'a message with this key is being processed; send it again shortly',
  messageReused: 'this key was already used for a message with other data',
  argumentKey: 'the mutation has no idempotency key in the argument its keyFrom reads',
  tooManyMutations: (max: number) =>
    `this request has more than ${max} idempotent mutations with a key; this one was not run: send the rest in another request`,
  graphqlNotReplayed: (field: string) =>
    `${field} was not selected when this key was first used: a retry gets the fields the first request selected`,
  reused: (header: string) => `${header} was already used for a different request`,
  tooDeep: 'request body is nested too deeply',
  unreadBody:
    "request body is read by no body parser, so it cannot be checked against the key; register a parser for its media type (e.g. app.useBodyParser('text'))",
  unavailable: 'idempotency store unavailable; retry shortly',
  shuttingDown: 'the server is shutting down; retry shortly',
  transactionAborted: 'the request failed on the server and nothing was committed',
  tooLargeToReplay: (max: number) =>
    `the request with this key was processed, but its response was over ${max} bytes and was not kept, so it cannot be sent again`,
  unreadable: 'the stored response for this key cannot be read at the moment; retry shortly',
  unstorable: (type: string) =>
    `the work with this key ran, but its result (${type}) cannot be stored as JSON, so it cannot be returned again; it does not run again`,
  phasesChanged:
    'the request with this key was started by an earlier version of the handler, whose steps this version does not take in the same order; it was not continued, and an operator has been told',
  noScope: 'the caller scope of this request could not be resolved',
  transactionTimedOut: (header: string) =>
    `the request ran past its transaction timeout and was rolled back; another request with this ${header} may be running, retry shortly`,
  notCommitted: 'the request could not be committed; retry shortly with the same key',
  scope: 'identity scope',
} as const;

/** Each problem type's `title` (RFC 9457: one per type); the first three are the IETF draft's (key-header-07 §2.7). */
export const PROBLEM_TITLES: Readonly<Record<IdempotencyErrorCode, string>> = {
  'key-missing': 'Idempotency-Key is missing',
  'key-reused': 'Idempotency-Key is already used',
  'key-in-flight': 'A request is outstanding for this Idempotency-Key',
  'key-invalid': 'Idempotency-Key is invalid',
  'body-unread': 'Request body cannot be fingerprinted',
  'body-too-deep': 'Request body is nested too deeply',
  'scope-invalid': 'Caller scope is invalid',
  'scope-unresolved': 'Caller scope could not be resolved',
  'store-unavailable': 'Idempotency store is unavailable',
  'transaction-timed-out': 'Transaction timed out',
  'not-committed': 'Request was not committed',
  'record-unreadable': 'Stored response cannot be read',
  'response-too-large': 'Response was too large to keep',
  'result-unstorable': 'Result could not be stored',
  'too-many-mutations': 'Too many idempotent mutations in one request',
  'phases-changed': "Handler's phases changed since the run started",
  'shutting-down': 'Server is shutting down',
  'transaction-aborted': 'Transaction was aborted',
};

/** What the OpenAPI document says of an `@Idempotent()` route: the IETF draft's policy, what each answer means. */
export const OPENAPI = {
  policy: (header: string, required: boolean, expiry: string, replayed: string | false) =>
    `**Idempotent** ([IETF Idempotency-Key draft](https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/)): ` +
    `send the \`${header}\` header with a new unique value per operation${required ? '' : ' (optional: without it the request runs without deduplication)'}, ` +
    `and the same value on every retry of it. A retry after the first request finished gets its stored response again` +
    `${replayed ? `, marked \`${replayed}: true\`` : ''}, without running it twice; while the first still runs, 409; ` +
    `the same key with a different request, 422. Keys expire ${expiry} after the response is stored.`,
  keyHeader: (expiry: string) =>
    `Unique per operation, the same on every retry of it, for ${expiry}; a UUID does. A Structured Field String ("…") is the same key unquoted.`,
  keyRequired: 'the key is missing, malformed, or too long',
  keyOptional: 'the key is malformed, or too long',
  inFlight: 'a request with this key is still running: retry after Retry-After seconds with the same key',
  reused: 'this key was already used for a different request',
  unavailable: 'the idempotency store is unavailable: retry after Retry-After seconds with the same key',
  retryAfter: 'Seconds to wait before retrying with the same key.',
  replayed: 'Present (`true`) when this is the stored response of an earlier request with the same key, replayed.',
  replayedBody: 'A replayed JSON object body has `"replayed": true` added.',
  echo: "The request's key, as sent.",
} as const;
