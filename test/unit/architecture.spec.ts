import { describe, expect, it } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';

// The folder rules of docs/architecture.md, checked on every import in lib/. A folder is a "home":
// inside core/, nest/, ops/, shared/, stores/ and transports/ each subfolder is one (`stores/redis`,
// `transports/http`), and the files directly inside such a folder are that folder's (`core`).

/** Types, sentences, errors, options and helpers: what every other folder may use. */
const SHARED = [
  'shared',
  'shared/interfaces',
  'shared/messages',
  'shared/utils',
  'shared/exceptions',
  'shared/options',
  'shared/http',
];
/** One idempotent run: the claim, the records, the lease, the waiting duplicates, recovery points, transactions, values, its events. */
const CORE = ['core', 'core/events', 'core/phases', 'core/transactions', 'core/values', 'core/waiting'];
/** What a store must and may do: the required interface, the optional capabilities and their guards. */
const CONTRACT = 'stores/contract';
/** A store: its own folder, what the stores share, the contract, the shared types. Never another store. */
const store = (name: string) => [`stores/${name}`, 'stores/shared', CONTRACT, ...SHARED];

const RULES: Readonly<Record<string, readonly string[]>> = {
  shared: [],
  // The module's options name the store contract (types only; the contract imports these types, not back).
  'shared/interfaces': [CONTRACT],
  // The request and response as Express and Fastify give them: GraphQL runs over HTTP too.
  'shared/http': [],
  // Every sentence a client, an operator or a developer reads: text, knowing nothing but the error codes.
  'shared/messages': ['shared/interfaces'],
  'shared/utils': ['shared/messages'],
  'shared/exceptions': ['shared', 'shared/interfaces', 'shared/messages'],
  'shared/options': ['shared', 'shared/interfaces', 'shared/messages', 'shared/utils', CONTRACT],
  core: [...CORE, ...SHARED, CONTRACT],
  'core/phases': [...SHARED, CONTRACT],
  'core/transactions': SHARED,
  // What each run came to, for the `events` listener and OpenTelemetry.
  'core/events': SHARED,
  'core/values': SHARED,
  'core/waiting': [...SHARED, CONTRACT],
  // A transport imports itself, the core and shared: never another transport.
  'transports/http': [...CORE, ...SHARED],
  'transports/graphql': ['core', 'core/values', ...SHARED],
  'transports/messages': ['core', 'core/values', ...SHARED],
  'transports/inbox': ['core', 'core/values', ...SHARED],
  'stores/memory': store('memory'),
  'stores/redis': store('redis'),
  'stores/postgres': store('postgres'),
  'stores/sqlite': store('sqlite'),
  'stores/mysql': store('mysql'),
  'stores/shared': [...SHARED, CONTRACT],
  [CONTRACT]: ['shared/interfaces'],
  // The `nestjs-idempotency/store` entry: the contract's types and the client shapes the stores take.
  stores: [
    'stores/memory',
    'stores/redis',
    'stores/postgres',
    'stores/sqlite',
    'stores/mysql',
    'stores/shared',
    CONTRACT,
    'shared/interfaces',
  ],
  // The `nestjs-idempotency/compat` entry: the names of 0.x, and what they stand for.
  // (the health result's type stands in the health indicator's file).
  compat: ['stores/memory', 'stores/redis', 'ops/health', ...SHARED],
  // The admin opens a sealed record to show it; the sealer encrypts a record in the stores' byte format.
  'ops/admin': ['ops/encryption', CONTRACT, ...SHARED],
  'ops/encryption': ['core', 'stores/shared', CONTRACT, ...SHARED],
  // Health and OpenAPI read the routes the Nest layer registered.
  'ops/health': ['nest', CONTRACT, ...SHARED],
  'ops/openapi': ['nest', ...SHARED],
  // The Nest layer: the interceptor dispatches through the transports' interface (core) and imports
  // none; the filter writes HTTP answers, the explorer registers the handlers whose deliveries are acked.
  nest: [...CORE, 'nest/decorators', 'transports/http', 'transports/messages', ...SHARED],
  'nest/decorators': ['nest', 'core/phases', 'transports/http', ...SHARED],
  // The second public entry (nestjs-idempotency/testing): only the public types, never the module.
  testing: ['shared/interfaces', CONTRACT],
};

/** The folders that are groups of homes. */
const GROUPS = new Set(['core', 'nest', 'ops', 'shared', 'stores', 'transports']);

/** What a lib/ path belongs to: its folder (two segments inside a group), or the file itself at the top level. */
function home(path: string): string {
  const parts = path.split('/');
  if (parts.length === 1) return path;
  return GROUPS.has(parts[0]) && parts.length > 2 ? parts.slice(0, 2).join('/') : parts[0];
}

/** The imports of `edges` (file -> imported file, both inside lib/) that their home's rule does not allow. */
function broken(edges: readonly (readonly [string, string])[]): string[] {
  return edges
    .filter(([file, target]) => {
      const from = home(file);
      const to = home(target);
      if (from === to || from === 'index.ts' || from === 'idempotency.module.ts') return false;
      const allowed = RULES[from];
      return !allowed || !allowed.includes(to);
    })
    .map(([file, target]) => `${file} -> ${target}`);
}

/** A call of a store's settling methods: `store.claim(`, `this.options.store.commit(`, `store.completeIn!(`. */
const STORE_CALL = /\bstore!?\.(claim|commit|release|completeIn|finishIn)!?\(/;

/**
 * The files outside core/ and stores/ (and the shipped store contract suite, testing/, which exists to
 * call them) whose source calls a store's claim, commit, release, completeIn or finishIn: the claim
 * and every way a claim settles belong to the core.
 */
function storeCallers(sources: readonly (readonly [string, string])[]): string[] {
  return sources
    .filter(([file, source]) => !/^(core|stores|testing)\//.test(file) && STORE_CALL.test(source))
    .map(([file]) => file);
}

/** The import cycles among `edges`, each as the files around it (one per cycle found by a depth-first walk). */
function cycles(edges: readonly (readonly [string, string])[]): string[][] {
  const next = new Map<string, string[]>();
  for (const [from, to] of edges) next.set(from, [...(next.get(from) ?? []), to]);
  const found: string[][] = [];
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (file: string): void => {
    const at = path.indexOf(file);
    if (at >= 0) return void found.push(path.slice(at));
    if (done.has(file)) return;
    path.push(file);
    for (const to of next.get(file) ?? []) visit(to);
    path.pop();
    done.add(file);
  };
  for (const file of next.keys()) visit(file);
  return found;
}

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** Each relative import of `file`, as a path inside lib/ ending in .ts. */
function imports(file: string): string[] {
  const source = readFileSync(file, 'utf8');
  return [...source.matchAll(/^\s*(?:import|export)[^'"]*from\s+'(\.[^']+)\.js';/gm)].map((m) =>
    relative('lib', normalize(join(dirname(file), `${m[1]}.ts`))),
  );
}

describe('lib/ architecture (docs/architecture.md)', () => {
  const all = files('lib');
  const edges = all.flatMap((f) => imports(f).map((t) => [relative('lib', f), t] as const));

  it('reads every file and finds the imports', () => {
    expect(all.length).toBeGreaterThan(30);
    expect(imports('lib/stores/memory/in-memory.store.ts')).toContain('stores/memory/bounded-lru.ts');
  });

  it('the top level holds only index.ts and the module', () => {
    expect(
      readdirSync('lib', { withFileTypes: true })
        .filter((e) => e.isFile())
        .map((e) => e.name)
        .sort(),
    ).toEqual(['idempotency.module.ts', 'index.ts']);
  });

  it('every folder imports only what its rule allows, and every folder has a rule', () => {
    expect(broken(edges)).toEqual([]);
    const homes = new Set(all.map((f) => home(relative('lib', f))));
    expect([...homes].filter((h) => !RULES[h] && h !== 'index.ts' && h !== 'idempotency.module.ts')).toEqual([]);
  });

  it('a wrong import fails the rules: a transport importing another, the core a transport, a store another store', () => {
    expect(
      broken([
        ['transports/messages/message.runner.ts', 'transports/http/handler.run.ts'],
        ['core/key.claimer.ts', 'transports/messages/message.runner.ts'],
        ['core/waiting/key.waiter.ts', 'core/key.claimer.ts'],
        ['stores/redis/redis.store.ts', 'stores/postgres/postgres.pool.ts'],
        ['shared/utils/key.util.ts', 'core/key.claimer.ts'],
        ['transports/http/handler.run.ts', 'nest/idempotency.interceptor.ts'],
        ['unknown/file.ts', 'shared/utils/key.util.ts'],
        // The contract knows no store, and a transport settles through the core, not the store.
        ['stores/contract/store.capabilities.ts', 'stores/memory/in-memory.store.ts'],
        ['transports/http/transaction.runner.ts', 'stores/contract/store.capabilities.ts'],
        // GraphQL reads its request through shared/http and its identity through the core.
        ['transports/graphql/graphql.runner.ts', 'transports/http/request.reader.ts'],
        ['transports/graphql/graphql.runner.ts', 'nest/idempotency.interceptor.ts'],
        // The core seals records through its port, never the cipher of ops/.
        ['core/record.builder.ts', 'ops/encryption/response.sealer.ts'],
      ]),
    ).toHaveLength(12);
    // Inside a home, and a transport's use of the core's events, pass.
    expect(
      broken([
        ['transports/http/handler.run.ts', 'transports/http/response.recorder.ts'],
        ['transports/http/phased.runner.ts', 'core/events/outcome.reporter.ts'],
        ['core/key.claimer.ts', 'core/waiting/duplicate.waiters.ts'],
      ]),
    ).toEqual([]);
  });

  it('only core/ and stores/ call a store to claim, commit, release or complete a key', () => {
    expect(storeCallers(all.map((f) => [relative('lib', f), readFileSync(f, 'utf8')] as const))).toEqual([]);
    // What the rule catches, and what it lets by: a capability check is no call.
    expect(
      storeCallers([
        ['transports/http/transaction.runner.ts', 'const done = await store.completeIn!(sql, claim.storeKey);'],
        ['transports/inbox/x.ts', 'await this.options.store.release(claim.storeKey, claim.owner);'],
        ['ops/admin/x.ts', 'await store.claim(key, claim);'],
        ['shared/options/x.ts', "if (typeof module.store.completeIn !== 'function') {}"],
        ['core/x.ts', 'await this.options.store.commit(k, o, r, t);'],
        ['nest/x.ts', 'await this.service.release(claim);'],
      ]),
    ).toEqual(['transports/http/transaction.runner.ts', 'transports/inbox/x.ts', 'ops/admin/x.ts']);
  });

  it('no import cycles, types included; a cycle is found', () => {
    expect(cycles(edges)).toEqual([]);
    expect(
      cycles([
        ['a.ts', 'b.ts'],
        ['b.ts', 'c.ts'],
        ['c.ts', 'a.ts'],
        ['c.ts', 'd.ts'],
      ]),
    ).toEqual([['a.ts', 'b.ts', 'c.ts']]);
  });

  it('small files: none over 250 lines (the files of sentences too), the protocol service under 200', () => {
    const lines = (f: string) => readFileSync(f, 'utf8').split('\n').length - 1;
    const long = all.filter((f) => lines(f) > 250);
    expect(long).toEqual([]);
    expect(lines(join('lib', 'core', 'idempotency.service.ts'))).toBeLessThan(200);
  });

  it('only the entries and the module know every store; the request path never imports one', () => {
    // The contract is no store; the record codec is the byte format, not a store: the sealer encrypts a record in it.
    const importers = edges
      .filter(
        ([file, t]) =>
          t.startsWith('stores/') &&
          !t.startsWith(`${CONTRACT}/`) &&
          t !== 'stores/shared/store-value.codec.ts' &&
          !file.startsWith('stores/'),
      )
      .map(([file]) => file);
    // compat/ holds the stores' names of 0.x.
    expect([...new Set(importers)].sort()).toEqual([
      'compat/index.ts',
      'compat/store.aliases.ts',
      'idempotency.module.ts',
      'index.ts',
    ]);
  });
});
