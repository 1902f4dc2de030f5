import { parseArgs } from 'node:util';
import { killTracked } from '../support/processes.js';
import type { StoreKind } from './cluster.js';
import {
  CONSUMER_FAULTS,
  type ConsumerResult,
  type ConsumerServers,
  consumerTable,
  runConsumerScenario,
  startConsumerServers,
  stopConsumerServers,
} from './consumers.js';
import { runAll, type ScenarioResult, table } from './runner.js';

// `npm run chaos -- --minutes 10 [--seed N] [--surfaces http,rabbitmq] [--stores redis,postgres] [--faults kill-pod,stall]
// [--operations 60] [--spread 4000] [--slow 400] [--pool 1]`:
// rounds of every fault on every store, with a new seed per scenario, until the time is up. Prints
// each scenario's row as it ends, the table and every violation at the end, and the seed of each
// scenario, so `--seed <it> --stores <its store> --faults <its fault>` replays one that failed.

const ALL: readonly StoreKind[] = ['memory', 'redis', 'postgres', 'sqlite', 'postgres-tx', 'mysql', 'mysql-tx'];

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '5' },
    seed: { type: 'string', default: String(Date.now() % 1_000_000) },
    stores: { type: 'string', default: ALL.join(',') },
    surfaces: { type: 'string', default: 'http,rabbitmq' },
    faults: { type: 'string' },
    operations: { type: 'string', default: '60' },
    spread: { type: 'string', default: '4000' },
    slack: { type: 'string', default: '3000' },
    slow: { type: 'string', default: '400' },
    pool: { type: 'string' },
    verbose: { type: 'boolean', default: false },
  },
});

async function main(): Promise<number> {
  const stores = values.stores.split(',') as StoreKind[];
  const unknown = stores.filter((s) => !ALL.includes(s));
  if (unknown.length) throw new Error(`unknown store ${unknown.join(', ')}; stores are ${ALL.join(', ')}`);
  const until = Date.now() + Number(values.minutes) * 60_000;
  let seed = Number(values.seed);
  console.log(`chaos: seed ${seed}, ${values.minutes} min, stores ${stores.join(', ')}`);
  const surfaces = values.surfaces.split(',');
  const results: ScenarioResult[] = [];
  const consumers: ConsumerResult[] = [];
  let servers: ConsumerServers | undefined;
  do {
    if (surfaces.includes('rabbitmq')) {
      servers ??= await startConsumerServers();
      for (const fault of CONSUMER_FAULTS.filter((f) => !values.faults || values.faults.split(',').includes(f.name))) {
        const r = await runConsumerScenario(servers, fault, {
          seed: seed++,
          messages: Number(values.operations),
          spreadMs: Number(values.spread),
        });
        consumers.push(r);
        console.log(
          `rabbitmq ${r.fault} seed ${r.seed}: ${r.published} published, ${r.charged} charged, ${r.doubles} doubles, ${r.lost} lost, ` +
            `${r.left} left${r.violations.length ? `, VIOLATIONS:\n  ${r.violations.join('\n  ')}` : ''}`,
        );
      }
    }
    if (!surfaces.includes('http')) continue;
    const round = await runAll(stores, {
      seed,
      operations: Number(values.operations),
      spreadMs: Number(values.spread),
      slackMs: Number(values.slack),
      slowMs: Number(values.slow),
      poolSize: values.pool ? Number(values.pool) : undefined,
      faults: values.faults?.split(','),
      report: (r) =>
        console.log(
          `${r.store} ${r.fault} seed ${r.seed}: ${r.requests} requests, ${r.runs} runs, ${r.doubles} doubles, ${r.stuck} stuck, ` +
            `${r.lostLeases} leases lost, ${r.notStored} not stored, ${r.stalls} pod stalls, ${r.storeStalls} store stalls, ${r.waiters} waiters, ${r.completed} finished by a completer, ` +
            `${r.maxAfterHealMs} ms after heal${r.violations.length ? `, VIOLATIONS:\n  ${r.violations.join('\n  ')}` : ''}`,
        ),
    });
    results.push(...round);
    seed += round.length;
  } while (Date.now() < until);
  if (servers) await stopConsumerServers(servers);
  if (results.length) console.log(`\n${table(results)}`);
  if (consumers.length) console.log(`\n${consumerTable(consumers)}`);
  for (const r of consumers.filter((c) => c.violations.length > 0)) {
    console.log(
      `\nrabbitmq ${r.fault} (replay: --seed ${r.seed} --surfaces rabbitmq --faults ${r.fault}):\n  ${r.violations.join('\n  ')}`,
    );
  }
  const failed = results.filter((r) => r.violations.length > 0);
  for (const r of failed) {
    console.log(
      `\n${r.store} ${r.fault} (replay: --seed ${r.seed} --stores ${r.store} --faults ${r.fault}):\n  ${r.violations.join('\n  ')}`,
    );
    if (values.verbose) console.log(JSON.stringify(r.evidence, null, 1));
  }
  const failedConsumers = consumers.filter((c) => c.violations.length > 0).length;
  console.log(`\n${results.length + consumers.length} scenarios, ${failed.length + failedConsumers} with violations`);
  return failed.length + failedConsumers ? 1 : 0;
}

main().then(
  async (code) => {
    await killTracked();
    process.exit(code);
  },
  async (error: unknown) => {
    console.error(error);
    await killTracked();
    process.exit(2);
  },
);
