import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import amqp from 'amqplib';
import { built } from '../support/build.js';
import { Pod, type PodOptions } from '../support/pod.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { RabbitMqServer, rabbitAvailable } from '../support/rabbitmq-server.js';
import { until } from '../support/timing.js';

built('.build');

// The ledger sample as a RabbitMQ consumer (RABBITMQ_URL): `charge.requested` events charged in
// PostgreSQL by @Idempotent({ transactional: true, ack: true }), in processes of their own that are
// killed with SIGKILL as a crashing consumer would be. The charge and its inbox record commit in one
// transaction; the module acks after that commit.

const QUEUE = 'ledger.charge-requests';
const ready = postgresAvailable('RabbitMQ consumer pods') && rabbitAvailable('RabbitMQ consumer pods');

// A consumer killed after COMMIT, before its ack, is drawn in docs/guides/message-handlers.md.
(ready ? describe : describe.skip)(
  'the ledger sample consuming RabbitMQ: one charge per message id across consumers and crashes',
  () => {
    let pg: PostgresServer;
    let broker: RabbitMqServer;
    let connection: amqp.ChannelModel;
    let channel: amqp.Channel;
    let url: string;
    let databases = 0;
    const pods: Pod[] = [];

    const start = async (over: Partial<PodOptions> = {}): Promise<Pod> => {
      const pod = await Pod.start({
        sample: 'ledger',
        store: 'postgres',
        postgresUrl: url,
        ...over,
        env: { RABBITMQ_URL: broker.url, ...over.env },
      });
      pods.push(pod);
      return pod;
    };
    const publish = (messageId: string, amount = 100): void => {
      const event = { pattern: 'charge.requested', data: { accountId: 'acct_alice', amount, currency: 'EUR' } };
      channel.sendToQueue(QUEUE, Buffer.from(JSON.stringify(event)), { messageId, persistent: true });
    };
    const charges = async (): Promise<Record<string, number>> => {
      const rows = await pg.query<{ key: string; n: number }>(
        'SELECT idempotency_key AS key, count(*)::int AS n FROM charges GROUP BY idempotency_key',
        [],
        url,
      );
      return Object.fromEntries(rows.map((r) => [r.key, r.n]));
    };
    /** Every delivery acked: nothing ready, nothing held by a consumer. */
    const drained = async (): Promise<boolean> => {
      const { ready: waiting, unacked } = await broker.queue(QUEUE);
      return waiting === 0 && unacked === 0;
    };

    beforeAll(async () => {
      [pg, broker] = await Promise.all([PostgresServer.start({ ownServer: true }), RabbitMqServer.start()]);
      connection = await amqp.connect(broker.url);
      channel = await connection.createChannel();
      // As the consumer declares it (Nest's default queue options).
      await channel.assertQueue(QUEUE, {});
    }, 120_000);
    beforeEach(async () => {
      url = await pg.createDatabase(`consumers_${process.pid}_${++databases}`);
    });
    afterEach(async () => {
      await Promise.all(pods.splice(0).map((p) => p.kill()));
      await channel.purgeQueue(QUEUE);
    });
    afterAll(async () => {
      await connection?.close().catch(() => undefined);
      await Promise.all([pg?.destroy(), broker?.stop()]);
    });

    it('two consumer processes, every message sent twice: one charge per message id, every delivery acked', async () => {
      await Promise.all([start(), start({ adapter: 'fastify', providerLatencyMs: 20 })]);
      const ids = Array.from({ length: 30 }, (_, i) => `order-${i}`);
      for (const id of ids) publish(id);
      // The producer's resend of every message, while the first copies are being consumed.
      for (const id of ids) publish(id);
      await until(async () => Object.keys(await charges()).length === ids.length && (await drained()), 60_000);
      expect(await charges()).toEqual(Object.fromEntries(ids.map((id) => [id, 1])));
    }, 120_000);

    it('a consumer killed after COMMIT, before its ack: the redelivery goes to another consumer, which skips it', async () => {
      const doomed = await start({ env: { FAULT: 'after-commit' } });
      publish('order-crash');
      await until(async () => (await charges())['order-crash'] === 1, 30_000);
      await doomed.kill();
      // The delivery the dead consumer never acked is the broker's again: one more consumer takes it.
      await until(async () => (await broker.queue(QUEUE)).ready === 1, 30_000);
      await start({ adapter: 'fastify' });
      await until(drained, 30_000);
      expect(await charges()).toEqual({ 'order-crash': 1 });
    }, 120_000);

    it('a consumer killed after its INSERT, before COMMIT: nothing charged; the redelivery charges once', async () => {
      const lease = { TRANSACTION_TIMEOUT_MS: '1500' };
      const doomed = await start({ providerLatencyMs: 30_000, env: lease });
      publish('order-midway');
      await until(async () => (await broker.queue(QUEUE)).unacked === 1, 30_000);
      // The charge is written inside the transaction: the pod holds a row lock on charges until COMMIT.
      await until(async () => {
        const [{ n }] = await pg.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
         WHERE c.relname = 'charges' AND l.mode = 'RowExclusiveLock'`,
          [],
          url,
        );
        return n > 0;
      }, 30_000);
      await doomed.kill();
      expect(await charges()).toEqual({});
      await start({ adapter: 'fastify', env: lease });
      await until(async () => (await charges())['order-midway'] === 1 && (await drained()), 30_000);
      expect(await charges()).toEqual({ 'order-midway': 1 });
    }, 120_000);
  },
);
