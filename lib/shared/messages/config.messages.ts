// What a developer reads when the application refuses to start.

/** A configured value as shown: `ConfigService.get()` hands over strings, and "got 3600000" hid why it was refused. */
const shown = (got: unknown): string => (typeof got === 'string' ? `the string '${got.slice(0, 60)}'` : String(got));

/** What to write for a store named by a string or a class instead of an instance. */
const STORES: Readonly<Partial<Record<string, string>>> = {
  memory: 'new InMemoryStore()',
  'in-memory': 'new InMemoryStore()',
  inmemorystore: 'new InMemoryStore()',
  redis: 'new RedisStore({ url: process.env.REDIS_URL })',
  redisstore: 'new RedisStore({ url: process.env.REDIS_URL })',
  postgres: 'new PostgresStore({ connectionString: process.env.DATABASE_URL })',
  postgresql: 'new PostgresStore({ connectionString: process.env.DATABASE_URL })',
  pg: 'new PostgresStore({ connectionString: process.env.DATABASE_URL })',
  postgresstore: 'new PostgresStore({ connectionString: process.env.DATABASE_URL })',
  mysql: 'new MySqlStore({ uri: process.env.DATABASE_URL })',
  mariadb: 'new MySqlStore({ uri: process.env.DATABASE_URL })',
  mysqlstore: 'new MySqlStore({ uri: process.env.DATABASE_URL })',
  sqlite: "new SqliteStore({ filename: 'idempotency.db' })",
  sqlitestore: "new SqliteStore({ filename: 'idempotency.db' })",
};
const ANY_STORE =
  'new InMemoryStore(), new RedisStore({ url }), new PostgresStore({ connectionString }) or new SqliteStore({ filename })';

/** Errors that stop the application at startup: a misconfiguration is never left for run time. */
export const CONFIG_ERRORS = {
  notAnObject: 'options must be an object',
  notAStore: (option: string, got: unknown, method: string) => {
    if (typeof got === 'string') {
      const store = STORES[got.toLowerCase()];
      return `${option} takes a store instance, not the string '${got.slice(0, 30)}': pass ${store ?? ANY_STORE}`;
    }
    if (typeof got === 'function' && /^class\s/.test(Function.prototype.toString.call(got)) && got.name) {
      const store = STORES[got.name.toLowerCase()] ?? `new ${got.name}(...)`;
      return `${option} takes a store instance, not the class ${got.name}: pass ${store}`;
    }
    if (typeof got === 'function') {
      return `${option} takes a store instance, not a function: pass ${ANY_STORE} (a factory belongs in forRootAsync({ useFactory }))`;
    }
    return `${option} must implement IdempotencyStore (missing ${method}()): pass ${ANY_STORE}, or a store of your own`;
  },
  missingPeer: (feature: string, name: string, major: number) =>
    `${feature} needs the "${name}" package: npm install ${name}@${major}`,
  storeTwice: 'give store or cache (its deprecated name), not both',
  moduleMissing:
    '@Idempotent() needs IdempotencyModule: add IdempotencyModule.forRoot() (or forRootAsync()) to the imports of your AppModule; it is global, so once is enough (with isGlobal: false, import it in each module whose controllers use @Idempotent())',
  transportTwice: (type: string) => `two idempotency transports serve the context type '${type}': register one`,
  noAdmin: (store: string, method: string) => `IdempotencyAdmin needs IdempotencyStore's ${method}(), which ${store} lacks`,
  adminKey: 'IdempotencyAdmin: the key must be a non-empty string, as the client sent it',
  adminScope: 'IdempotencyAdmin: scope must be a non-empty string, as the identity resolver returns it',
  adminOwner:
    "IdempotencyAdmin: name at most one of consumer (an inbox consumer), messageHandler or mutation ('Class.method'), as a non-empty string",
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
  acceptUnsealedUntil:
    'encryption.acceptUnsealedUntil must be a Date or epoch milliseconds: until when records written before encryption was on are replayed',
  encryptionCurrent: 'encryption.current must be the id of one of encryption.keys',
  events: 'events must be a function (event) => void or an injectable class with onIdempotencyEvent(event)',
  boolean: (name: string, got: unknown) => `${name} must be true or false, got ${shown(got)}`,
  ack: (got: unknown) =>
    `ack must be true (the module acks every delivery), 'skipped' (your handler acks what it runs, the module the rest) or false, got ${shown(got)}`,
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
  keyWithoutIdempotent:
    'the key is read on @Idempotent() routes only, so here it would be undefined and nothing deduplicated: add @Idempotent() to the route, or remove @IdempotencyKey()',
  safeMethod: 'GET, HEAD, OPTIONS and other safe methods change nothing and need no key; use it on POST, PUT, PATCH or DELETE',
  ownResponse: '@Res()/@Next() without { passthrough: true } leaves the response to the handler; return the body instead',
  transactions: 'transactions must be an IdempotencyTransactions: an object with run(work), e.g. clsTransactions(txHost)',
  phasesNeedKey: "atomicPhases: true needs a key on every request: missingHeader 'pass-through' runs phases nobody can resume",
  completer: 'completer must be an object: { intervalMs?, idleMs?, batch? }',
  workflowName: '@PhasedWorkflow() needs a name of 1 to 100 letters, digits, _ . : or -',
  phasesTransactional: 'atomicPhases and transactional exclude each other: each phase is a transaction of its own',
  noTransactions: (option: string) =>
    `${option}: true needs the module option transactions, e.g. transactions: clsTransactions(txHost) (docs/guides/exactly-once.md)`,
  transactionalStore:
    "transactional: true needs a store that commits its record in your transaction: store: new PostgresStore(...) or new MySqlStore(...) on your application's database",
  recoveryPointsStore:
    "atomicPhases: true needs a store that commits its record in your transaction and keeps recovery points: store: new PostgresStore(...) on your application's database (MySqlStore has no recovery points)",
  identityUnbuildable: (name: string, reason: string) =>
    `the identity resolver ${name} cannot be built: ${reason}. Register it as a provider of a module the controller can reach; a REQUEST-scoped resolver is resolved for each request`,
  streamType:
    'a route declared to return a StreamableFile is never stored, so a retry would run it again; return the bytes (a Buffer or a value) instead',
  onlyOn: (option: string, handlers: string) => `${option} is an option of ${handlers} only`,
  keyFrom: 'keyFrom must be a function (data, context) => string, the message id',
  messageScope: 'scope must be a function (data, context) => string, where the message id is unique (a tenant)',
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
  mysqlTarget: 'give exactly one of uri (a pool of its own) and pool (yours)',
  sqliteTarget: 'give exactly one of filename (a database of its own) and database (yours)',
  sqliteSynchronous: (got: unknown) => `synchronous must be 'full' or 'normal', got ${shown(got)}`,
  tableNameLength: (max: number, got: number) =>
    `tableName may have at most ${max} characters here (the claim procedure's name adds 6 to MySQL's 64), got ${got}`,
  identifier: (name: string) => `${name} must be an SQL identifier: a letter or _, then letters, digits or _, at most 63 in all`,
} as const;
