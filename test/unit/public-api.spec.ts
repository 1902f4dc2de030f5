import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';

/** The package's entries: the export map's subpath, the file that builds it. */
const ENTRIES = {
  'nestjs-idempotency': 'lib/index.ts',
  'nestjs-idempotency/store': 'lib/stores/index.ts',
  'nestjs-idempotency/testing': 'lib/testing/index.ts',
  'nestjs-idempotency/compat': 'lib/compat/index.ts',
} as const;
type Entry = keyof typeof ENTRIES;

/** Each name an entry file exports: `export { … }`, `export type { … }` and `export type|const Name`. */
function exported(file: string): string[] {
  const source = readFileSync(file, 'utf8');
  const listed = [...source.matchAll(/^export (?:type )?\{([^}]*)\}/gm)].flatMap((m) =>
    m[1]
      .split(',')
      .map((name) => name.trim())
      .filter(Boolean),
  );
  const declared = [...source.matchAll(/^export (?:type|const|class|interface|function) (\w+)/gm)].map((m) => m[1]);
  return [...listed, ...declared];
}

/** The README's "API" table: per entry, the names its rows list in backticks (a row with no entry continues the one above). */
function documented(readme = readFileSync('README.md', 'utf8')): Map<string, Set<string>> {
  const start = readme.indexOf('\n## API\n');
  const section = readme.slice(start, readme.indexOf('\n## ', start + 1));
  const table = new Map<string, Set<string>>();
  let entry = '';
  for (const row of section.split('\n').filter((line) => line.startsWith('| ') && !line.startsWith('| entry'))) {
    const [first, names] = row.split('|').slice(1, 3);
    const named = /`([^`]+)`/.exec(first)?.[1];
    if (named) entry = named;
    const set = table.get(entry) ?? new Set<string>();
    for (const m of names.matchAll(/`([A-Za-z_]\w*)`/g)) set.add(m[1]);
    table.set(entry, set);
  }
  return table;
}

/** Names of `exports` missing from `listed`, and names of `listed` that are not exported. */
function mismatch(exports: readonly string[], listed: ReadonlySet<string>) {
  return {
    undocumented: exports.filter((name) => !listed.has(name)),
    notExported: [...listed].filter((name) => !exports.includes(name)),
  };
}

describe('the public API (README "API")', () => {
  it('the package.json export map has exactly these entries, each built from its file', () => {
    const exportsMap = JSON.parse(readFileSync('package.json', 'utf8')).exports as Record<string, { types?: string }>;
    for (const [entry, file] of Object.entries(ENTRIES)) {
      const subpath = entry === 'nestjs-idempotency' ? '.' : `.${entry.slice('nestjs-idempotency'.length)}`;
      expect(exportsMap[subpath]?.types).toBe(`./dist/${file.slice('lib/'.length).replace(/\.ts$/, '.d.ts')}`);
    }
    expect(Object.keys(exportsMap).filter((k) => k !== './sql/*')).toHaveLength(Object.keys(ENTRIES).length);
  });

  it('the root entry exports what an application writes: at most 40 names', () => {
    const names = exported(ENTRIES['nestjs-idempotency']);
    expect(names).toContain('IdempotencyModule');
    expect(names.length).toBeLessThanOrEqual(40);
    expect(new Set(names).size).toBe(names.length);
  });

  it.each(Object.keys(ENTRIES) as Entry[])(
    'every name %s exports is in its README row, and every name there is exported',
    (entry) => {
      const listed = documented().get(entry);
      expect(listed?.size).toBeGreaterThan(3);
      expect(mismatch(exported(ENTRIES[entry]), listed ?? new Set())).toEqual({ undocumented: [], notExported: [] });
    },
  );

  it('a name is in one entry only, but for the two an application and a store author both write', () => {
    const seen = new Map<string, Entry[]>();
    for (const entry of Object.keys(ENTRIES) as Entry[])
      for (const name of exported(ENTRIES[entry])) seen.set(name, [...(seen.get(name) ?? []), entry]);
    const twice = [...seen].filter(([, entries]) => entries.length > 1).map(([name]) => name);
    expect(twice.sort()).toEqual(['IdempotencyStore', 'IdempotencyTransactions']);
  });

  it('reads a table whose rows miss a name, or list one too many, as wrong', () => {
    const readme = '\n## API\n\n| entry | names |\n| --- | --- |\n| `nestjs-idempotency` | `A`, `B` |\n|  | `C` |\n\n## Next\n';
    const table = documented(readme);
    expect([...(table.get('nestjs-idempotency') ?? [])]).toEqual(['A', 'B', 'C']);
    expect(mismatch(['A', 'B', 'D'], table.get('nestjs-idempotency') ?? new Set())).toEqual({
      undocumented: ['D'],
      notExported: ['C'],
    });
  });
});
