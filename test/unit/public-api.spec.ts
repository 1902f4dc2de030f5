import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';

/** Each name an entry file exports, by its `export { … }` and `export type { … }` lines. */
function exported(file: string): string[] {
  const source = readFileSync(file, 'utf8');
  return [...source.matchAll(/^export (?:type )?\{([^}]*)\}/gm)].flatMap((m) =>
    m[1]
      .split(',')
      .map((name) => name.trim())
      .filter(Boolean),
  );
}

/** The names the README's "API" section lists, in backticks. */
function documented(): Set<string> {
  const readme = readFileSync('README.md', 'utf8');
  const section = readme.slice(readme.indexOf('\n## API\n'), readme.indexOf('\n## ', readme.indexOf('\n## API\n') + 1));
  return new Set([...section.matchAll(/`([A-Za-z_][\w]*)`/g)].map((m) => m[1]));
}

describe('the public API (README "API")', () => {
  it('finds the section and the exports', () => {
    expect(documented().size).toBeGreaterThan(40);
    expect(exported('lib/index.ts')).toContain('IdempotencyModule');
  });

  it('every name lib/index.ts and lib/testing/index.ts export is listed in the README, and every name listed is exported', () => {
    const names = [...exported('lib/index.ts'), ...exported('lib/testing/index.ts')];
    const listed = documented();
    expect(names.filter((name) => !listed.has(name))).toEqual([]);
    const known = new Set([...names, 'IdempotencyKey', 'errorBody', 'code']);
    expect([...listed].filter((name) => !known.has(name))).toEqual([]);
  });
});
