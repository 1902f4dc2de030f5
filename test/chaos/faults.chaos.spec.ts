import { afterAll, describe, expect, it } from '@jest/globals';
import { built } from '../support/build.js';
import { mysqlAvailable } from '../support/mysql-server.js';
import { postgresAvailable } from '../support/postgres-server.js';
import { natsAvailable } from '../support/nats-server.js';
import { redisAvailable } from '../support/redis-server.js';
import type { StoreKind } from './cluster.js';
import { runAll, type ScenarioResult, table } from './runner.js';

built('.build');

// The bounded fault-injection run: every fault of the catalogue once on every store it applies to,
// with a fixed seed, on real pods (Express and Fastify) and real servers of the suite's own. The
// longer randomized run is `npm run chaos`; docs/chaos.md says what each fault does.

const SEED = 20261204;
const stores: StoreKind[] = [
  'memory',
  'sqlite',
  ...(redisAvailable('fault-injection suite (Redis)') ? (['redis'] as const) : []),
  ...(postgresAvailable('fault-injection suite (PostgreSQL)') ? (['postgres', 'postgres-tx'] as const) : []),
  ...(mysqlAvailable('fault-injection suite (MySQL)') ? (['mysql', 'mysql-tx'] as const) : []),
];

describe('fault injection: each fault once per store, checked by the history checker', () => {
  const results: ScenarioResult[] = [];
  afterAll(() => {
    if (results.length) process.stdout.write(`\nfault injection (seed ${SEED}):\n${table(results)}\n`);
  });

  it.each(stores)(
    "%s: no handler runs twice for a stored key, every answer is the same and the right tenant's, no key stays stuck",
    async (store) => {
      const round = await runAll([store], {
        seed: SEED + stores.indexOf(store) * 100,
        operations: 16,
        spreadMs: 1500,
        slackMs: 4000,
      });
      results.push(...round);
      // The evidence of a failure goes to the log: a CI run is often the only one that sees it.
      for (const r of round)
        if (r.violations.length)
          process.stdout.write(`\n${r.store} ${r.fault} (seed ${r.seed}) evidence:\n${JSON.stringify(r.evidence, null, 1)}\n`);
      const violations = round.flatMap((r) => r.violations.map((v) => `${r.fault} (seed ${r.seed}): ${v}`));
      expect(violations).toEqual([]);
      expect(round.every((r) => r.requests > 0 && r.runs > 0)).toBe(true);
      // Every surface of the store's pods was under the faults: the chaos pods' HTTP routes, GraphQL
      // mutation, inbox and NATS handler; the ledger's transactional charges and phased rides.
      const sent = new Set(round.flatMap((r) => Object.keys(r.routes)));
      const surfaces =
        store === 'postgres-tx'
          ? ['/charges', '/rides']
          : store === 'mysql-tx'
            ? ['/charges']
            : [
                '/fast',
                '/wait',
                '/graphql',
                '/inbox',
                ...(natsAvailable('fault-injection suite (NATS)') ? ['nats:chaos.nats'] : []),
              ];
      expect(surfaces.filter((s) => !sent.has(s))).toEqual([]);
      if (store === 'postgres-tx') expect(round.find((r) => r.fault === 'crash-in-phase')?.completed).toBeGreaterThan(0);
    },
    180_000,
  );
});
