import { defineConfig } from 'vitepress';
import { withMermaid } from 'vitepress-plugin-mermaid';

const guides = [
  ['What happens, in pictures', 'flows'],
  ['Stores', 'stores'],
  ['Migrations', 'migrations'],
  ['Options from ConfigService', 'configuration'],
  ["The caller's identity", 'identity'],
  ['Clients', 'clients'],
  ['Exactly-once with your database', 'exactly-once'],
  ['Recovery points', 'recovery-points'],
  ['Duplicates that wait', 'waiting-duplicates'],
  ['Message handlers', 'message-handlers'],
  ['GraphQL mutations', 'graphql'],
  ['The inbox', 'inbox'],
  ['A store of your own', 'custom-stores'],
  ['Testing your app', 'testing'],
  ['Operations', 'operations'],
] as const;

// The site of docs/: the guides, the reference pages, the contributors' pages and the API reference
// TypeDoc writes into api/ before the build. A dead link between pages fails the build; links out of
// docs/ (the README, the CHANGELOG, a test a diagram names) are checked by test/unit/docs-links.spec.ts.
export default withMermaid(
  defineConfig({
    title: 'nestjs-idempotency',
    description: 'Retry-safe POST, PUT, PATCH and DELETE, GraphQL mutations and messages for NestJS',
    cleanUrls: true,
    ignoreDeadLinks: [/^(\.\/)?(\.\.\/)+(README|CHANGELOG)(\.md)?(#.*)?$/],
    themeConfig: {
      search: { provider: 'local' },
      nav: [
        { text: 'Guides', link: '/guides/flows' },
        { text: 'Reference', link: '/how-it-works' },
        { text: 'API', link: '/api/' },
      ],
      sidebar: [
        { text: 'Guides', items: guides.map(([text, page]) => ({ text, link: `/guides/${page}` })) },
        {
          text: 'Reference',
          items: [
            { text: 'How it works', link: '/how-it-works' },
            { text: 'Standards and OpenAPI', link: '/standards' },
            { text: 'Performance', link: '/performance' },
            { text: 'API', link: '/api/' },
          ],
        },
        {
          text: 'Behind the scenes',
          collapsed: true,
          items: [
            { text: 'Contributing', link: '/contributing' },
            { text: 'Architecture', link: '/architecture' },
            { text: 'Behaviour (B1–B12)', link: '/behaviour' },
            { text: 'Attacks (ATK-01–14)', link: '/attacks' },
            { text: 'Hardening', link: '/hardening' },
            { text: 'Fault injection', link: '/chaos' },
            { text: 'Mutation testing', link: '/mutation' },
          ],
        },
      ],
    },
  }),
);
