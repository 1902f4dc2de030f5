import type { IdempotencyErrorCode } from './interfaces/idempotency-error.interface.js';

// Every sentence this package shows anyone, grouped by who reads it, so a reviewer sees none carries a byte a client sent.

/** What a client reads in an error body: the header (as configured), a limit or an index, never a byte it sent. */
export const MESSAGES = {
  missing: (header: string) => `${header} header is required`,
  tooLong: (what: string, max: number) => `${what} exceeds ${max} characters`,
  malformed: (header: string) =>
    `${header} starts with a quote but is not a valid Structured Field String (RFC 9651): unterminated, a bad escape, or something after the closing quote`,
  forbiddenChar: (what: string, index: number) => `${what} has a control character or space at index ${index}`,
  inFlight: (header: string) => `${header} in-flight; retry shortly`,
  messageKey:
    'the message has no idempotency key: give it a message id (RabbitMQ messageId, NATS Nats-Msg-Id) or data.idempotencyKey, or read it with keyFrom',
  messageInFlight: 'a message with this key is being processed; send it again shortly',
  messageReused: 'this key was already used for a message with other data',
  argumentKey: 'the mutation has no idempotency key in the argument its keyFrom reads',
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

/** What an operator reads in the logs while the application runs. `route` is `Controller.method`. */
export const LOGS = {
  cacheDeprecated: 'IdempotencyModule: the option cache is deprecated and will be removed in 1.0; name it store (same value)',
  renamed: (old: string, now: string) =>
    `${old} is deprecated and will be removed in 1.0; use ${now}, the same thing under the package's one word for a store`,
  noScope: (route: string, got: unknown) =>
    `${route}: the identity resolver returned ${typeof got === 'string' ? 'an empty string' : typeof got}, not a scope; answering 500`,
  noRawBody: (route: string) =>
    `${route}: fingerprint 'raw' needs the request's bytes, but it has none (req.rawBody); fingerprinting the parsed body instead. Create the application with rawBody: true, e.g. NestFactory.create(AppModule, { rawBody: true }). Logged once`,
  fingerprintUnverifiable: (route: string, tag: string) =>
    `${route}: the key's stored fingerprint was made by another fingerprint setting (${tag}), which cannot be recomputed here; taking the request as the same one (a replay or 409, never a second run)`,
  claimFailed: (route: string, reason: string) => `${route}: claim failed, answering 503: ${reason}`,
  unreadable: (route: string, reason: string) => `${route}: answering 503: ${reason}`,
  takenOver: (route: string) => `${route}: response not stored: the claim had expired and the key was taken over`,
  commitFailed: (route: string) => `${route}: response not stored: the store did not answer for a lease; the claim expires`,
  commitRetrying: (route: string, reason: string) => `${route}: commit failed, retrying for a lease: ${reason}`,
  committedLate: (route: string) => `${route}: response stored after the commit was retried`,
  deadLettered: (route: string, attempts: number) =>
    `${route}: a message failed ${attempts} times; rejected without requeue (dead-lettered if its queue has a dead-letter exchange), its key freed`,
  messageRejected: (route: string, code: string) =>
    `${route}: a message was rejected without requeue (${code}): delivering it again cannot succeed`,
  tooLargeToStore: (route: string, bytes: number, max: number) =>
    `${route}: response of ${bytes} bytes is over maxResponseBytes (${max}): the key keeps a response-too-large record instead`,
  releaseFailed: (route: string, reason: string) => `${route}: claim not released, it expires with its lease: ${reason}`,
  heldTooLong: (route: string, maxHoldMs: number) =>
    `${route}: the handler has held its key for ${maxHoldMs} ms (maxHoldMs) without finishing; the lease is no longer renewed and lapses, after which a retry runs the handler again`,
  leaseLost: (route: string) => `${route}: lease lost while the handler was still running`,
  renewalFailed: (route: string, reason: string) => `${route}: lease renewal failed: ${reason}`,
  givenUp: (route: string, why: string) => `${route}: response not stored: the handler ${why}; the key is released`,
  detached: (route: string, why: string) =>
    `${route}: ${why} before the handler finished; it runs to completion and its own result is stored`,
  /** Reasons for {@link LOGS.givenUp} (these two) and {@link LOGS.detached} (the next two). */
  streamed: 'was streamed',
  returnedStream: 'returned a stream',
  answeredOutside: 'a response was sent',
  abandoned: 'the request was abandoned (client gone, or an outer timeout or error)',
  transactionLost: (route: string) =>
    `${route}: the transactional request ran past its transactionTimeoutMs lease; its transaction is rolled back, answering 409`,
  transactionRolledBack: (route: string, reason: string) =>
    `${route}: the transaction was rolled back, answering 503; the key is released: ${reason}`,
  commitUnknown: (route: string, reason: string) =>
    `${route}: COMMIT failed with an unknown outcome, answering 503; the key is kept until its lease ends (a retry then replays the record if it was committed, or runs again): ${reason}`,
  transactionAborted: (route: string, reason: string) =>
    `${route}: the handler returned although its transaction was aborted by an SQL error it caught; run such statements in a savepoint (a nested transaction). Answering 500, the key is freed: ${reason}`,
  beginFailed: (route: string, reason: string) => `${route}: the transaction could not be opened, answering 503: ${reason}`,
  transactionalStream: (route: string) =>
    `${route}: a transactional handler returned a stream, which cannot be recorded before COMMIT; its transaction is rolled back`,
  foreignValue: 'a value the idempotency layer did not write was under an idempotency key; it is replaced by a claim',
  perProcess:
    'InMemoryStore keeps idempotency state per process: a retry that reaches another pod runs again. Use RedisStore with more than one instance.',
  redisDown: (reason: string) => `Redis unreachable: ${reason}`,
  claimWrites: (fn: string) => `${fn} is migration 001's, which locks the row on each replay: apply sql/postgres/003`,
  postgresIdleError: (reason: string) => `an idle PostgreSQL connection failed; the pool replaces it: ${reason}`,
  sweepFailed: (reason: string) => `sweeping expired idempotency rows failed; the next sweep tries again: ${reason}`,
  redisUp: 'Redis reachable again',
  completerUnknown: (workflow: string) => `an abandoned run of ${workflow} waits: no @PhasedWorkflow('${workflow}') here`,
  completerFinished: (workflow: string) => `the completer drove an abandoned run of ${workflow} through its last phase`,
  completerFailed: (workflow: string, reason: string) => `completing a run of ${workflow} failed; tried again later: ${reason}`,
  listenFailed: (reason: string) => `waiting duplicates are woken by this process only (the store's listener failed): ${reason}`,
  listening: 'waiting duplicates are woken by every process again (the store listens)',
  announceFailed: (reason: string) => `a settled key was not announced (waiters elsewhere wait out waitMs): ${reason}`,
  swaggerFailed: (reason: string) =>
    `@nestjs/swagger is installed but could not be loaded, so @Idempotent() routes are not documented in OpenAPI: ${reason}`,
  openTelemetryFailed: (reason: string) =>
    `@opentelemetry/api is installed but could not be loaded, so no idempotency metrics or span attributes are recorded: ${reason}`,
  listenerFailed: (reason: string) =>
    `the idempotency events listener failed (requests are not affected; logged at most once a minute): ${reason}`,
  listenerBehind: (max: number, dropped: number) =>
    `the idempotency events listener has ${max} calls unsettled; events are dropped until they settle (${dropped} so far; logged at most once a minute)`,
  errorBodyFailed: (code: string | undefined, reason: string) =>
    `errorBody failed for ${code ?? 'an application error'}, sending the default body instead: ${reason}`,
} as const;

/** What an operator reads when a store, the runner, the health check or the sealer fails; never a client. */
export const FAILURES = {
  memoryFull: 'InMemoryStore is full: every entry is a claim in flight or kept by its prefix quota',
  redisTimeout: (ms: number) => `Redis command timed out after ${ms} ms`,
  redisForeign: 'RedisStore: the key holds a value that is not an idempotency record',
  closed: 'the idempotency store is closed (the application is shutting down)',
  postgresSchema: (reason: string) => `PostgresStore: the schema could not be created: ${reason}`,
  noRows: 'the transactions executor returned neither rows nor a result with rows: give clsTransactions() a query that does',
  leaseOver: 'the transaction timeout passed before the response was complete',
  phaseName: (max: number) => `a phase's name must be a string of 1 to ${max} characters, not finish()`,
  noRun: '@Phases() is given only to handlers of @Idempotent({ atomicPhases: true }) routes',
  phaseTwice: (name: string) => `${name} was used twice in one run, or after finish(): each name once, finish() last`,
  noPing: (store: string) => `${store} has no ping(), so its health cannot be checked (see IdempotencyStore)`,
  pingTimeout: (ms: number) => `the idempotency store did not answer within ${ms} ms`,
  unknownKeyId: (id: string) =>
    `the key's record is sealed with encryption key ${id}, which is not among encryption.keys: restore that key, or forget the record`,
  notAuthentic: (id: string) =>
    `the key's record, sealed with encryption key ${id}, failed authentication (altered, or moved from another key): forget the record`,
  notEncrypted: "the key's record is sealed, but this application has no encryption option: configure its keys, or forget it",
  damagedRecord:
    "the key's record is damaged (its format tag or head cannot be read); it is neither replayed nor run again: forget the record",
  recordMoving: 'the large record of the key changed each time it was read; try again',
  noTable: 'the table does not exist (createSchema is false: run schemaSql() in a migration)',
  column: (name: string, type: string, got: string | undefined) =>
    got === undefined ? `column ${name} (${type}) is missing` : `column ${name} is ${got}, not ${type}`,
  noPrimaryKey: 'column key is not its primary key (two claims of one key could both succeed)',
  noClaimFunction: (name: string) => `the claim function ${name} is missing (run this release's schemaSql())`,
  schemaMismatch: (store: string, table: string, problems: string[]) =>
    `${store}: table ${table} is not what this release needs: ${problems.join('; ')}`,
  poolBusy: (ms: number) => `no PostgreSQL connection was free for the store within ${ms} ms`,
  damagedSealed: 'the key holds a sealed record without its fingerprint line (damaged); it is neither replayed nor run again',
  newerFormat: (format: number, known: number) =>
    `the key's record is in format ${format}, written by a newer release (this one reads up to ${known}); it is neither replayed nor run again until the deploy is complete`,
} as const;

/** A configured value as shown: `ConfigService.get()` hands over strings, and "got 3600000" hid why it was refused. */
const shown = (got: unknown): string => (typeof got === 'string' ? `the string '${got.slice(0, 60)}'` : String(got));

/** Errors that stop the application at startup: a misconfiguration is never left for run time. */
export const CONFIG_ERRORS = {
  notAnObject: 'options must be an object',
  notAStore: (option: string, method: string) => `${option} must implement IdempotencyStore (missing ${method}())`,
  storeTwice: 'give store or cache (its deprecated name), not both',
  noAdmin: (store: string, method: string) => `IdempotencyAdmin needs IdempotencyStore's ${method}(), which ${store} lacks`,
  adminKey: 'IdempotencyAdmin: the key must be a non-empty string, as the client sent it',
  adminScope: 'IdempotencyAdmin: scope must be a non-empty string, as the identity resolver returns it',
  inboxString: (what: string) => `IdempotencyInbox.run(): ${what} must be a non-empty string`,
  headerName: 'headerName must be a valid HTTP header name',
  keyPrefix: 'keyPrefix must be a string without control characters or spaces',
  integer: (name: string, min: number, max: number, got: unknown) =>
    `${name} must be an integer from ${min} to ${max}, got ${shown(got)}`,
  problemTypeBaseUrl:
    'problemTypeBaseUrl must be an absolute URI prefix (scheme first, no white space), e.g. https://api.example.com/problems/',
  replayedHeader: 'replayedHeader must be a header name (an HTTP token) or false',
  errorBody: 'errorBody must be a function ({ status, code, message }) => body',
  encryption: 'encryption must be { keys: { <id>: <32-byte Buffer> }, current: <id> }',
  encryptionKeyId: (id: string) => `encryption key id ${JSON.stringify(id.slice(0, 70))} must be 1 to 64 of A-Z a-z 0-9 . _ -`,
  encryptionKey: (id: string) => `encryption key ${id} must be 32 bytes (a Buffer or Uint8Array) for AES-256-GCM`,
  encryptionCurrent: 'encryption.current must be the id of one of encryption.keys',
  events: 'events must be a function (event) => void or an injectable class with onIdempotencyEvent(event)',
  boolean: (name: string, got: unknown) => `${name} must be true or false, got ${shown(got)}`,
  fingerprint: (got: unknown) => `fingerprint must be 'canonical', 'raw' or a function (req) => value, got ${String(got)}`,
  oneOf: (name: string, allowed: readonly string[], got: unknown) =>
    `${name} must be '${allowed.slice(0, -1).join("', '")}' or '${allowed.at(-1)}', got ${String(got)}`,
  identity: 'identity must be a function (req) => string or an injectable resolver class',
  unknownOption: (key: string, near: string | undefined, valid: readonly string[]) =>
    `unknown option ${JSON.stringify(key)}${near ? ` (did you mean ${near}?)` : ''}; valid: ${valid.join(', ')}`,
  forRootAsyncOnly: (key: string) => `${key} is an option of forRootAsync(), not of forRoot()`,
  registrationOnly: (key: string, registration: string) =>
    `${key} is an option of ${registration} itself; the options its factory returns cannot change how the module is registered`,
  asyncNeedsFactory: 'IdempotencyModule.forRootAsync() needs useFactory, useClass or useExisting',
  sse: 'an @Sse() stream cannot be stored and replayed',
  safeMethod: 'GET, HEAD, OPTIONS and other safe methods change nothing and need no key; use it on POST, PUT, PATCH or DELETE',
  ownResponse: '@Res()/@Next() without { passthrough: true } leaves the response to the handler; return the body instead',
  transactions: 'transactions must be an IdempotencyTransactions: an object with run(work), e.g. clsTransactions(txHost)',
  phasesNeedKey: "atomicPhases: true needs a key on every request: missingHeader 'pass-through' runs phases nobody can resume",
  completer: 'completer must be an object: { intervalMs?, idleMs?, batch? }',
  workflowName: '@PhasedWorkflow() needs a name of 1 to 100 letters, digits, _ . : or -',
  phasesTransactional: 'atomicPhases and transactional exclude each other: each phase is a transaction of its own',
  noTransactions: (option: string) =>
    `${option}: true needs the module option transactions, e.g. transactions: clsTransactions(txHost) (README: "Exactly-once with your database")`,
  transactionalStore: (option: string) =>
    `${option}: true needs a store that commits its record in your transaction: store: new PostgresStore(...) on your application's database`,
  identityUnbuildable: (name: string, reason: string) =>
    `the identity resolver ${name} cannot be built: ${reason}. Register it as a provider of a module the controller can reach; a REQUEST-scoped resolver is resolved for each request`,
  streamType:
    'a route declared to return a StreamableFile is never stored, so a retry would run it again; return the bytes (a Buffer or a value) instead',
  onlyOn: (option: string, handlers: string) => `${option} is an option of ${handlers} only`,
  keyFrom: 'keyFrom must be a function (data, context) => string, the message id',
  notARoute:
    'only the route and message handlers of controllers and GraphQL mutation resolvers are deduplicated; on a provider method (a service) it would do nothing, so it is refused; remove the decorator (IdempotencyInbox.run() deduplicates any other code)',
  notAMutation: (type: string) => `a GraphQL ${type} resolver is not deduplicated (only mutations change anything)`,
  transactionalStreamType: 'transactional: true cannot return a StreamableFile: a stream cannot be recorded before COMMIT',
  maxEntries: (got: unknown) => `InMemoryStore: maxEntries must be a positive integer, got ${shown(got)}`,
  quotas: 'InMemoryStore: prefixQuotas needs non-empty prefixes and non-negative integer quotas',
  quotasTooLarge: (reserved: number, maxEntries: number) =>
    `InMemoryStore: prefixQuotas reserve ${reserved} entries, more than maxEntries (${maxEntries})`,
  redisTarget: 'give exactly one of url (a client of its own) and client (yours)',
  postgresTarget: 'give exactly one of connectionString (a pool of its own) and pool (yours)',
  sqliteTarget: 'give exactly one of filename (a database of its own) and database (yours)',
  sqliteSynchronous: (got: unknown) => `synchronous must be 'full' or 'normal', got ${shown(got)}`,
  identifier: (name: string) => `${name} must be an SQL identifier: a letter or _, then letters, digits or _, at most 63 in all`,
} as const;
