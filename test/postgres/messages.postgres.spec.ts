import { afterAll, beforeAll, describe } from '@jest/globals';
import { Controller, Inject, type INestMicroservice } from '@nestjs/common';
import { ClientProxyFactory, type ClientProxy, MessagePattern, Payload, Transport } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import type { AddressInfo, Server } from 'node:net';
import pg from 'pg';
import { lastValueFrom } from 'rxjs';
import { Idempotent, IdempotencyModule, PostgresStore } from '../../lib/index.js';
import { PgTransactions } from '../support/pg-transactions.js';
import { PostgresServer, postgresAvailable } from '../support/postgres-server.js';
import { shippingScenarios } from '../support/shipping-scenarios.js';

const describePg = postgresAvailable('transactional message handlers') ? describe : describe.skip;

let server: PostgresServer;
let pool: pg.Pool;
const failing = new Set<string>();

@Controller()
class ShippingConsumer {
  constructor(@Inject(PgTransactions) private readonly tx: PgTransactions) {}

  /** The business write goes through the transaction the module opened for the message. */
  @MessagePattern('ship')
  @Idempotent({ transactional: true })
  async ship(@Payload() data: { idempotencyKey: string; order: string }) {
    const { rows } = await this.tx.client.query<{ id: number }>('INSERT INTO shipments (order_id) VALUES ($1) RETURNING id', [
      data.order,
    ]);
    if (failing.delete(data.order)) throw new Error('label printer offline');
    return { shipment: rows[0].id };
  }
}

// Issue 26: exactly once with the database for a message handler, as for a transactional route:
// the inbox record commits in the handler's transaction, over a real TCP microservice.
describePg('@Idempotent({ transactional: true }) message handlers on PostgreSQL', () => {
  let service: INestMicroservice;
  let client: ClientProxy;
  beforeAll(async () => {
    server = await PostgresServer.start();
    const url = await server.createDatabase(`messages_${process.pid}`);
    pool = new pg.Pool({ connectionString: url, max: 8 });
    pool.on('error', () => undefined);
    await pool.query('CREATE TABLE shipments (id serial PRIMARY KEY, order_id text NOT NULL)');
    const tx = new PgTransactions(pool);
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ store: new PostgresStore({ pool, sweepIntervalMs: 0 }), transactions: tx })],
      controllers: [ShippingConsumer],
      providers: [{ provide: PgTransactions, useValue: tx }],
    }).compile();
    service = moduleRef.createNestMicroservice({
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port: 0 },
      logger: false,
    });
    await service.listen();
    const { port } = service.unwrap<Server>().address() as AddressInfo;
    client = ClientProxyFactory.create({ transport: Transport.TCP, options: { host: '127.0.0.1', port } });
    await client.connect();
  }, 60_000);
  afterAll(async () => {
    client?.close();
    await service?.close();
    await pool?.end();
    await server?.destroy();
  });

  const ship = (order: string) => lastValueFrom(client.send<unknown>('ship', { idempotencyKey: `m-${order}`, order }));
  const shipments = async (order: string) =>
    (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM shipments WHERE order_id = $1', [order])).rows[0].n;

  shippingScenarios(() => ({ ship, shipments, failing }));
});
