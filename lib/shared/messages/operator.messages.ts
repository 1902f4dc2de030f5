// What an operator reads in the logs and in a store's or the health check's errors; never a client.

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
  phasesChanged: (key: string, next: string, done: readonly string[], skipped: readonly string[]) =>
    `phased run of key ${JSON.stringify(key)}: an earlier attempt committed ${JSON.stringify(done)}, and this one reached ${JSON.stringify(next)} before ${JSON.stringify(skipped)}: the handler's phases changed since (a deploy?). Not run, answering 500 on every retry; finish the run by hand and forget the key (IdempotencyAdmin), or deploy the phases in their earlier order`,
  recoveryPointUnread: (route: string, reason: string) =>
    `${route}: the key was claimed but its recovery point could not be read, so the key is released and the request answered 503 (the health check says why when the recovery points' table is missing): ${reason}`,
  unreadable: (route: string, reason: string) => `${route}: answering 503: ${reason}`,
  takenOver: (route: string) => `${route}: response not stored: the claim had expired and the key was taken over`,
  commitFailed: (route: string) => `${route}: response not stored: the store did not answer for a lease; the claim expires`,
  commitRetrying: (route: string, reason: string) => `${route}: commit failed, retrying for a lease: ${reason}`,
  committedLate: (route: string) => `${route}: response stored after the commit was retried`,
  deadLettered: (route: string, attempts: number, id: string) =>
    `${route}: message ${id} failed ${attempts} times; rejected without requeue, its key freed. A queue with a dead-letter exchange parks it there; without one, RabbitMQ deletes it`,
  ackOnNoAck: (route: string) =>
    `${route}: RabbitMQ closed the channel on the module's ack ("unknown delivery tag"): the queue is consumed with noAck: true (Nest's default), where nothing may be acked. Set noAck: false in the microservice's options, or remove ack from @Idempotent()`,
  messageRejected: (route: string, why: string, id: string) =>
    `${route}: message ${id} was rejected without requeue (${why}): delivering it again cannot succeed. A queue with a dead-letter exchange parks it there; without one, RabbitMQ deletes it`,
  messageRefused: (route: string, why: string) => `${route}: a message was refused: ${why}`,
  unreadableMessage: (reason: string) => `its key or scope could not be read, nothing ran: ${reason}`,
  graphqlOutputFailed: (route: string, reason: string) =>
    `${route}: the mutation ran, but its answer could not be completed through the schema to be stored (${reason}); the resolver's value is stored instead, and a retry resolves its fields from it`,
  lossyValue: (route: string, part: string) =>
    `${route}: its result holds ${part}: a duplicate gets the first result back as JSON, so it gets something else than the first caller did. Return plain data (logged once)`,
  unstorable: (route: string, type: string, why: string) =>
    `${route}: its result (${type}) cannot be stored as JSON (${why}); the key keeps a result-unstorable record, so a duplicate is refused with that code and never runs it again. Return plain JSON values (a BigInt as a string, no cycles)`,
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
  mysqlSession: (reason: string) => `a new MySQL connection could not be set up for the store (isolation, lock wait): ${reason}`,
  postgresIdleError: (reason: string) => `an idle PostgreSQL connection failed; the pool replaces it: ${reason}`,
  sweepFailed: (reason: string) => `sweeping expired idempotency rows failed; the next sweep tries again: ${reason}`,
  redisUp: 'Redis reachable again',
  completerUnknown: (workflow: string) => `an abandoned run of ${workflow} waits: no @PhasedWorkflow('${workflow}') here`,
  completerFinished: (workflow: string) => `the completer drove an abandoned run of ${workflow} through its last phase`,
  completerFailed: (workflow: string, reason: string) => `completing a run of ${workflow} failed; tried again later: ${reason}`,
  completerGaveUp: (workflow: string, attempts: number, reason: string) =>
    `completing a run of ${workflow} failed ${attempts} times; this process leaves it to its client's retry (or an operator) from now on: ${reason}`,
  completerEnded: (workflow: string, status: number) =>
    `a phase of an abandoned run of ${workflow} ended it with ${status}: stored as its response, the run is over`,
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
  workNotRun: 'the transactions port returned without running the work (no transaction was opened)',
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
  notSealed:
    "the key's record is not sealed although encryption is on (written before encryption, or by someone who can write to the store): forget it, or set encryption.acceptUnsealedUntil while records from before encryption remain",
  damagedRecord:
    "the key's record is damaged (its format tag or head cannot be read); it is neither replayed nor run again: forget the record",
  recordMoving: 'the large record of the key changed each time it was read; try again',
  noTable: 'the table does not exist (createSchema is false: run schemaSql() in a migration)',
  column: (name: string, type: string, got: string | undefined) =>
    got === undefined ? `column ${name} (${type}) is missing` : `column ${name} is ${got}, not ${type}`,
  noPhasesTable: (table: string) => `the recovery points' table ${table} is missing`,
  phasesUnusable: (store: string, why: string) =>
    `${store}: atomicPhases routes answer 503: ${why} (createSchema is false: apply the migrations 002 and 004, or schemaSql())`,
  noPrimaryKey: 'column key is not its primary key (two claims of one key could both succeed)',
  noClaimFunction: (name: string) => `the claim function ${name} is missing (run this release's schemaSql())`,
  schemaMismatch: (store: string, table: string, problems: string[]) =>
    `${store}: table ${table} is not what this release needs: ${problems.join('; ')}`,
  mysqlKeyTooLong: (bytes: number, max: number) =>
    `the store key is ${bytes} bytes, more than MySqlStore's ${max}: lower maxKeyLength or maxScopeLength`,
  mysqlPacket: (allowed: number, needed: number) =>
    `MySqlStore: the server's max_allowed_packet is ${allowed} bytes, too small for a response of maxResponseBytes (${needed} bytes with its record): raise max_allowed_packet on the server, or lower maxResponseBytes`,
  mysqlSchema: (reason: string) => `MySqlStore: the schema could not be created: ${reason}`,
  noProcedure: (name: string) => `the procedure ${name} is missing (run this release's schemaSql())`,
  poolBusy: (ms: number, database: string) => `no ${database} connection was free for the store within ${ms} ms`,
  damagedSealed: 'the key holds a sealed record without its fingerprint line (damaged); it is neither replayed nor run again',
  newerFormat: (format: number, known: number) =>
    `the key's record is in format ${format}, written by a newer release (this one reads up to ${known}); it is neither replayed nor run again until the deploy is complete`,
} as const;
