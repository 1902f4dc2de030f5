import { describe, expect, it } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';

// The folder rules of docs/architecture.md, checked on every import in lib/.
/** What every store may import besides its own folder. */
const STORE = [
  'stores/shared',
  'shared/interfaces',
  'options',
  'shared/utils',
  'shared/idempotency.constants.ts',
  'shared/messages',
];

const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  'shared/interfaces': ['shared/interfaces'],
  // Every sentence a client, an operator or a developer reads: text, knowing nothing but the error codes.
  'shared/messages': ['shared/messages', 'shared/interfaces'],
  'shared/utils': ['shared/utils', 'shared/messages'],
  'shared/exceptions': ['shared/exceptions', 'shared/interfaces', 'shared/idempotency.constants.ts', 'shared/messages'],
  'shared/idempotency.constants.ts': [],
  http: ['http', 'shared/interfaces', 'shared/exceptions', 'shared/messages'],
  options: ['options', 'shared/interfaces', 'shared/utils', 'shared/idempotency.constants.ts', 'shared/messages'],
  // A store knows its own folder, what the stores share, and the shared types; never another store.
  'stores/memory': [...STORE, 'stores/memory'],
  'stores/redis': [...STORE, 'stores/redis'],
  'stores/postgres': [...STORE, 'stores/postgres'],
  'stores/sqlite': [...STORE, 'stores/sqlite'],
  'stores/shared': STORE,
  transactions: ['transactions', 'shared/interfaces', 'shared/messages'],
  // A message as the protocol reads it: a context, like http/, but knowing no HTTP.
  inbox: ['shared/interfaces', 'shared/utils', 'shared/exceptions', 'shared/messages'],
  // A GraphQL mutation as the protocol reads it: a context too; its output stored and replayed through the schema.
  graphql: ['graphql', 'shared/interfaces', 'shared/utils', 'shared/messages'],
  'ops/openapi': [
    'ops/openapi',
    'shared/interfaces',
    'shared/exceptions',
    'shared/idempotency.constants.ts',
    'shared/messages',
    'route-options.registry.ts',
    'idempotent-handlers.finder.ts',
    'shared/utils',
  ],
  'ops/encryption': ['shared/interfaces', 'stores/shared', 'shared/idempotency.constants.ts', 'shared/messages'],
  'ops/health': [
    'shared/interfaces',
    'shared/utils',
    'shared/idempotency.constants.ts',
    'shared/messages',
    'route-options.registry.ts',
  ],
  'ops/events': [
    'ops/events',
    'shared/interfaces',
    'shared/exceptions',
    'shared/utils',
    'shared/idempotency.constants.ts',
    'shared/messages',
  ],
  // The admin opens a sealed record to show it.
  'ops/admin': [
    'ops/admin',
    'ops/encryption',
    'shared/interfaces',
    'shared/exceptions',
    'shared/utils',
    'shared/idempotency.constants.ts',
    'shared/messages',
  ],
  decorators: [
    'shared/idempotency.constants.ts',
    'shared/messages',
    'shared/interfaces',
    'http',
    'idempotency.interceptor.ts',
    'idempotency.filter.ts',
    'phases',
  ],
  // Recovery points: a run of atomic phases as the protocol drives it, knowing no HTTP.
  phases: [
    'phases',
    'shared/interfaces',
    'shared/exceptions',
    'shared/utils',
    'shared/idempotency.constants.ts',
    'shared/messages',
  ],
  // Duplicates that wait for a key in flight: the protocol's, knowing neither HTTP nor a store.
  waiting: ['waiting', 'shared/interfaces', 'shared/utils', 'shared/idempotency.constants.ts', 'shared/messages'],
  // The second public entry (nestjs-idempotency/testing): only the public types, never the module.
  testing: ['testing', 'shared/interfaces'],
};

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

/** Folders of folders: a path inside one belongs to its second segment (`stores/redis`, `shared/utils`). */
const GROUPS = new Set(['shared', 'ops', 'stores']);

/** What a lib/ path belongs to: its folder (two segments inside a group), or the file itself at the top level. */
const home = (path: string): string => {
  const parts = path.split('/');
  if (parts.length === 1) return path;
  return GROUPS.has(parts[0]) ? parts.slice(0, 2).join('/') : parts[0];
};

describe('lib/ architecture (docs/architecture.md)', () => {
  const all = files('lib');

  it('reads every file and finds the imports', () => {
    expect(all.length).toBeGreaterThan(30);
    expect(imports('lib/stores/memory/in-memory.store.ts')).toContain('stores/memory/bounded-lru.ts');
  });

  it('every folder imports only what its row allows', () => {
    const broken: string[] = [];
    for (const file of all) {
      const from = home(relative('lib', file));
      const allowed = ALLOWED[from];
      if (!allowed) continue; // the top level may import anything
      for (const target of imports(file)) {
        if (!allowed.includes(home(target))) broken.push(`${relative('lib', file)} -> ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('small files: none over 250 lines (the files of sentences too), the protocol service under 200', () => {
    const lines = (f: string) => readFileSync(f, 'utf8').split('\n').length - 1;
    const long = all.filter((f) => lines(f) > 250);
    expect(long).toEqual([]);
    expect(lines(join('lib', 'idempotency.service.ts'))).toBeLessThan(200);
  });

  it('only index.ts and the module know every store; the request path never imports one', () => {
    // The record codec is the byte format, not a store: the sealer encrypts a record in it.
    const importers = all
      .filter((f) => imports(f).some((t) => t.startsWith('stores/') && t !== 'stores/shared/store-value.codec.ts'))
      .map((f) => relative('lib', f))
      .filter((f) => !f.startsWith('stores/'));
    expect(importers.sort()).toEqual(['idempotency.module.ts', 'index.ts']);
  });

  it('the protocol knows no HTTP: it reads a call through IdempotencyContext, never http/', () => {
    // The claim, the commit, the records and the lease; what they report and throw.
    const protocol = [
      'idempotency.service.ts',
      'idempotency-key.reader.ts',
      'key.claimer.ts',
      'record.builder.ts',
      'record.committer.ts',
      'lease.renewer.ts',
      // The inbox is the protocol's second caller: messages, not requests.
      'idempotency.inbox.ts',
      'inbox.runner.ts',
      'message.runner.ts',
      'message.acknowledger.ts',
      'message-key.reader.ts',
      ...all
        .map((f) => relative('lib', f))
        .filter((f) => /^(ops\/events|shared\/exceptions|shared\/interfaces|inbox|waiting|phases)\//.test(f)),
    ];
    expect(protocol.filter((f) => all.includes(join('lib', f)))).toHaveLength(protocol.length);
    const broken = protocol.flatMap((f) =>
      imports(join('lib', f))
        .filter((t) => t.startsWith('http/'))
        .map((t) => `${f} -> ${t}`),
    );
    expect(broken).toEqual([]);
  });
});
