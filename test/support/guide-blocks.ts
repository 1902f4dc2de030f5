import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The README and every user guide in docs/ whose code a user may paste. */
export function guidePages(root = '.'): string[] {
  return [
    'README.md',
    'docs/how-it-works.md',
    'docs/standards.md',
    ...readdirSync(join(root, 'docs/guides'))
      .filter((f) => f.endsWith('.md'))
      .sort()
      .map((f) => `docs/guides/${f}`),
  ];
}

/** The ```ts blocks of a page that start with an import: whole files, as a user pastes them. */
export function completeBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]).filter((code) => code.startsWith('import '));
}

/**
 * Every complete block of the pages as files: the first block that exports what another imports
 * (`import { MapStore } from './map-store.js'`, the quick start's `AppModule` from './app.module.js')
 * is saved under that name, so that the importing block compiles; the others are numbered.
 */
export function guideFiles(root = '.'): Map<string, string> {
  const blocks = guidePages(root).flatMap((page) => completeBlocks(readFileSync(join(root, page), 'utf8')));
  const imported = new Map(
    blocks.flatMap((code) =>
      [...code.matchAll(/^import \{ (\w+) \} from '\.\/([\w.-]+)\.js';$/gm)].map((m) => [m[1], m[2]] as const),
    ),
  );
  const files = new Map<string, string>();
  blocks.forEach((code, i) => {
    const exported = /^export class (\w+)/m.exec(code)?.[1];
    const named = exported === undefined ? undefined : imported.get(exported);
    if (named !== undefined) imported.delete(exported!);
    files.set(`${named ?? `example-${i + 1}`}.ts`, code);
  });
  return files;
}

/** The README's quick start, word for word: the module, and its `main.ts` on Express and on Fastify. */
export function quickStart(root = '.'): { appModule: string; express: string; fastify: string } {
  const blocks = completeBlocks(readFileSync(join(root, 'README.md'), 'utf8'));
  const main = (adapter: RegExp) => blocks.find((code) => code.includes('NestFactory.create') && adapter.test(code))!;
  return {
    appModule: blocks.find((code) => code.includes('export class AppModule'))!,
    express: main(/^(?![\s\S]*FastifyAdapter)/),
    fastify: main(/FastifyAdapter/),
  };
}
