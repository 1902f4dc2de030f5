import amqp from 'amqplib';
import { Pod } from '../support/pod.js';
import { PostgresServer } from '../support/postgres-server.js';
import { RabbitMqServer } from '../support/rabbitmq-server.js';
import { sleep } from '../support/timing.js';
import { markdownTable } from './runner.js';
import { random } from './workload.js';

// The fault-injection run of a message surface: the ledger sample consuming `charge.requested` from
// RabbitMQ with @Idempotent({ transactional: true, ack: true }), two consumer processes, one queue,
// every message charged in PostgreSQL with its inbox record. The checker's rules: every message id the
// broker confirmed is charged exactly once (none lost, none twice), and in the end no delivery is
// left ready or unacknowledged in the queue.

const QUEUE = 'ledger.charge-requests';

/** A fault of the consumer scenario. */
export interface ConsumerFault {
  readonly name: string;
  /** What it does, for docs/chaos.md and the report. */
  readonly does: string;
}

export const CONSUMER_FAULTS: readonly ConsumerFault[] = [
  { name: 'none', does: 'no fault: two consumers, every message sent once or twice' },
  { name: 'kill-consumer', does: 'SIGKILL one consumer mid-stream; a new one starts a second later' },
  {
    name: 'kill-after-commit',
    does: 'a consumer dies by itself right after one of its COMMITs, before the ack; a new one starts',
  },
  {
    name: 'broker-restart',
    does: 'the broker stops (SIGTERM) and starts again mid-stream; consumers and the producer reconnect',
  },
  { name: 'redelivery-storm', does: 'every message sent three times in a burst, with consumers killed and restarted twice' },
];

export interface ConsumerResult {
  fault: string;
  seed: number;
  published: number;
  charged: number;
  doubles: number;
  lost: number;
  /** Deliveries still ready or unacknowledged at the end. */
  left: number;
  violations: string[];
}

/** What a consumer scenario runs on: one PostgreSQL and one broker, shared by every scenario of a run. */
export interface ConsumerServers {
  pg: PostgresServer;
  broker: RabbitMqServer;
}

export async function startConsumerServers(): Promise<ConsumerServers> {
  const [pg, broker] = await Promise.all([PostgresServer.start({ ownServer: true }), RabbitMqServer.start()]);
  return { pg, broker };
}

export async function stopConsumerServers(servers: ConsumerServers): Promise<void> {
  await Promise.all([servers.pg.destroy(), servers.broker.stop()]);
}

/** A producer that knows which messages the broker took: a confirm channel, reopened after a broker restart. */
class Producer {
  private connection: amqp.ChannelModel | undefined;
  private channel: amqp.ConfirmChannel | undefined;
  readonly confirmed = new Set<string>();

  constructor(private readonly url: string) {}

  async send(messageId: string, amount: number): Promise<void> {
    const event = { pattern: 'charge.requested', data: { accountId: 'acct_alice', amount, currency: 'EUR' } };
    // Bounded by time, not attempts: a restart on a busy machine took longer than 100 quick refusals.
    const until = Date.now() + 120_000;
    while (Date.now() < until) {
      try {
        const channel = await this.open();
        channel.sendToQueue(QUEUE, Buffer.from(JSON.stringify(event)), { messageId, persistent: true });
        await channel.waitForConfirms();
        this.confirmed.add(messageId);
        return;
      } catch {
        // The broker is away (a restart): open again and send again; a copy that did land is a duplicate.
        await this.close();
        await sleep(200);
      }
    }
  }

  async close(): Promise<void> {
    const connection = this.connection;
    this.connection = this.channel = undefined;
    await connection?.close().catch(() => undefined);
  }

  private async open(): Promise<amqp.ConfirmChannel> {
    if (this.channel) return this.channel;
    this.connection = await amqp.connect(this.url);
    this.connection.on('error', () => undefined);
    const channel = await this.connection.createConfirmChannel();
    channel.on('error', () => undefined);
    await channel.assertQueue(QUEUE, {});
    this.channel = channel;
    return channel;
  }
}

/** One consumer scenario: `messages` ids published over `spreadMs`, `fault` striking during it, then the checker. */
export async function runConsumerScenario(
  servers: ConsumerServers,
  fault: ConsumerFault,
  options: { seed: number; messages: number; spreadMs: number; deadlineMs?: number },
): Promise<ConsumerResult> {
  const { pg, broker } = servers;
  const rng = random(options.seed);
  const prefix = `${fault.name}-${options.seed.toString(36)}`;
  const url = await pg.createDatabase(`chaos_consumers_${process.pid}_${options.seed}`);
  const pods: Pod[] = [];
  const start = async (env: NodeJS.ProcessEnv = {}): Promise<Pod> => {
    const pod = await Pod.start({
      sample: 'ledger',
      store: 'postgres',
      postgresUrl: url,
      adapter: pods.length % 2 ? 'fastify' : 'express',
      // Slow enough that a kill finds deliveries in flight.
      providerLatencyMs: 20 + Math.floor(rng() * 60),
      env: { RABBITMQ_URL: broker.url, TRANSACTION_TIMEOUT_MS: '3000', ...env },
    });
    pods.push(pod);
    return pod;
  };
  const producer = new Producer(broker.url);
  const violations: string[] = [];
  try {
    const firstFault = fault.name === 'kill-after-commit' ? { FAULT: `after-commit:${1 + Math.floor(rng() * 8)}` } : {};
    const [doomed] = [await start(firstFault), await start()];
    const ids = Array.from({ length: options.messages }, (_, i) => `${prefix}-${i}`);
    const copies = fault.name === 'redelivery-storm' ? 3 : 1;
    const sending = (async () => {
      for (const id of ids) {
        const times = copies + (rng() < 0.3 ? 1 : 0);
        for (let c = 0; c < times; c++) await producer.send(id, 100 + ids.indexOf(id));
        await sleep(rng() * ((2 * options.spreadMs) / ids.length));
      }
    })();
    await sleep(options.spreadMs * (0.2 + 0.4 * rng()));
    if (fault.name === 'kill-consumer') {
      await doomed.kill();
      await sleep(1_000);
      await start();
    } else if (fault.name === 'kill-after-commit') {
      for (let i = 0; i < 300 && !doomed.exited; i++) await sleep(100);
      await start();
    } else if (fault.name === 'broker-restart') {
      await broker.restart();
    } else if (fault.name === 'redelivery-storm') {
      for (let round = 0; round < 2; round++) {
        await pods[pods.length - 1].kill();
        await start();
        await sleep(300);
      }
    }
    await sending;
    const deadline = Date.now() + (options.deadlineMs ?? 60_000);
    let rows: Record<string, number> = {};
    let left = Infinity;
    while (Date.now() < deadline) {
      rows = await charges(pg, url, prefix);
      const queue = await broker.queue(QUEUE);
      left = queue.ready + queue.unacked;
      if (left === 0 && ids.every((id) => !producer.confirmed.has(id) || rows[id] !== undefined)) break;
      await sleep(500);
    }
    let doubles = 0;
    let lost = 0;
    for (const id of ids) {
      const n = rows[id] ?? 0;
      if (!producer.confirmed.has(id)) continue;
      if (n === 0) {
        lost++;
        violations.push(`${id}: confirmed by the broker, never charged (lost)`);
      } else if (n > 1) {
        doubles++;
        violations.push(`${id}: charged ${n} times`);
      }
    }
    if (left > 0) violations.push(`${left} deliveries still ready or unacknowledged at the deadline`);
    const charged = Object.keys(rows).length;
    return {
      fault: fault.name,
      seed: options.seed,
      published: producer.confirmed.size,
      charged,
      doubles,
      lost,
      left,
      violations,
    };
  } finally {
    await producer.close();
    await Promise.all(pods.map((p) => p.kill()));
    // The next scenario starts on an empty queue.
    const channel = await amqp.connect(broker.url).then(
      async (c) => ({ c, ch: await c.createChannel() }),
      () => undefined,
    );
    await channel?.ch.purgeQueue(QUEUE).catch(() => undefined);
    await channel?.c.close().catch(() => undefined);
  }
}

/** Charges per message id of this scenario (the ledger keys a charge by the message id). */
async function charges(pg: PostgresServer, url: string, prefix: string): Promise<Record<string, number>> {
  const rows = await pg
    .query<{ key: string; n: number }>(
      'SELECT idempotency_key AS key, count(*)::int AS n FROM charges WHERE idempotency_key LIKE $1 GROUP BY idempotency_key',
      [`${prefix}-%`],
      url,
    )
    .catch(() => []);
  return Object.fromEntries(rows.map((r) => [r.key, r.n]));
}

/** The table of consumer results: one line per fault. */
export function consumerTable(results: readonly ConsumerResult[]): string {
  const head = ['surface', 'fault', 'seed', 'published', 'charged', 'doubles', 'lost', 'left in queue', 'violations'];
  const rows = results.map((r) => [
    'rabbitmq',
    r.fault,
    String(r.seed),
    String(r.published),
    String(r.charged),
    String(r.doubles),
    String(r.lost),
    String(r.left),
    String(r.violations.length),
  ]);
  return markdownTable(head, rows);
}
