import { describe, expect, it } from '@jest/globals';
import GithubSlugger from 'github-slugger';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';

// Every relative link of the README and of docs/ points at a file that exists and, with a #fragment,
// at a heading of that file as GitHub names its anchors. Moving a section must move its links too.

function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? markdownFiles(join(dir, e.name)) : e.name.endsWith('.md') ? [join(dir, e.name)] : [],
  );
}

const FILES = ['README.md', 'CHANGELOG.md', ...markdownFiles('docs')];

/** The text outside fenced code blocks: a link inside a code sample is code. */
const prose = (markdown: string): string => markdown.replace(/^```[\s\S]*?^```$/gm, '');

/** The anchors GitHub gives the headings of `markdown`. */
function anchors(markdown: string): Set<string> {
  const slugger = new GithubSlugger();
  return new Set(
    [...prose(markdown).matchAll(/^#{1,6} (.+)$/gm)].map((m) =>
      slugger.slug(m[1].replace(/`/g, '').replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')),
    ),
  );
}

/** The relative links of `markdown` (`[text](target)`), without web addresses and mail links. */
function links(markdown: string): string[] {
  return [...prose(markdown).matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]).filter((t) => !/^[a-z]+:/i.test(t));
}

/** The links of `files` that lead nowhere, as `file: target`. */
function deadLinks(files: readonly string[], read: (file: string) => string | undefined): string[] {
  const dead: string[] = [];
  for (const file of files) {
    for (const target of links(read(file) ?? '')) {
      const [path, fragment] = target.split('#');
      const resolved = path === '' ? file : normalize(join(dirname(file), path));
      const text = read(resolved);
      if (text === undefined && !existsSync(resolved)) dead.push(`${file}: ${target}`);
      else if (fragment !== undefined && (text === undefined || !anchors(text).has(fragment))) dead.push(`${file}: ${target}`);
    }
  }
  return dead;
}

const readMarkdown = (file: string): string | undefined =>
  existsSync(file) && file.endsWith('.md') ? readFileSync(file, 'utf8') : undefined;

describe('documentation links', () => {
  it('every relative link of the README and docs/ reaches a file and a heading that exist', () => {
    expect(FILES.length).toBeGreaterThan(15);
    expect(deadLinks(FILES, readMarkdown)).toEqual([]);
  });

  it('every sequence diagram names the test that runs its sequence, and that test names the page back', () => {
    const unpaired: string[] = [];
    let diagrams = 0;
    for (const file of FILES) {
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/^```mermaid\n[\s\S]*?^```\n\n(.*)$/gm)) {
        diagrams++;
        const test = /\]\(([^)]*test\/[^)]+\.spec\.ts)\)/.exec(m[1])?.[1];
        const spec = test && normalize(join(dirname(file), test));
        if (!spec || !existsSync(spec) || !readFileSync(spec, 'utf8').includes(file))
          unpaired.push(`${file}: ${m[1].slice(0, 60)}`);
      }
    }
    expect(diagrams).toBeGreaterThanOrEqual(8);
    expect(unpaired).toEqual([]);
  });

  it('names a missing file, a missing heading, and lets a heading with code and a web address by', () => {
    const pages: Record<string, string> = {
      'a.md':
        "# Top\n\n## Duplicates that wait (`inFlight: 'wait'`)\n\n[ok](#duplicates-that-wait-inflight-wait) [x](b.md#nowhere) [y](c.md) [web](https://x.test/#y)\n\n```md\n[code](d.md)\n```\n",
      'b.md': '# B\n',
    };
    expect(deadLinks(['a.md'], (f) => pages[f])).toEqual(['a.md: b.md#nowhere', 'a.md: c.md']);
  });
});
