import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { built } from '../support/build.js';
import { postgresAvailable } from '../support/postgres-server.js';
import { rabbitAvailable } from '../support/rabbitmq-server.js';
import {
  CONSUMER_FAULTS,
  type ConsumerResult,
  type ConsumerServers,
  consumerTable,
  runConsumerScenario,
  startConsumerServers,
  stopConsumerServers,
} from './consumers.js';

built('.build');

// The bounded fault-injection run of the RabbitMQ surface: every consumer fault once, with a fixed
// seed, on real consumer processes, a real broker and a real PostgreSQL. `npm run chaos` runs it
// longer and randomized; docs/chaos.md says what each fault does.

const SEED = 20261206;
const ready =
  postgresAvailable('fault-injection suite (RabbitMQ consumers)') &&
  rabbitAvailable('fault-injection suite (RabbitMQ consumers)');

(ready ? describe : describe.skip)(
  'fault injection on RabbitMQ consumers: every message charged once, none left unacknowledged',
  () => {
    let servers: ConsumerServers;
    const results: ConsumerResult[] = [];
    beforeAll(async () => {
      servers = await startConsumerServers();
    }, 120_000);
    afterAll(async () => {
      if (results.length) process.stdout.write(`\nfault injection on consumers (seed ${SEED}):\n${consumerTable(results)}\n`);
      if (servers) await stopConsumerServers(servers);
    });

    it.each(CONSUMER_FAULTS.map((f) => [f.name, f] as const))(
      '%s',
      async (_, fault) => {
        const result = await runConsumerScenario(servers, fault, {
          seed: SEED + CONSUMER_FAULTS.indexOf(fault),
          messages: 20,
          spreadMs: 2_000,
        });
        results.push(result);
        expect(result.violations).toEqual([]);
        expect(result.published).toBe(20);
      },
      240_000,
    );
  },
);
