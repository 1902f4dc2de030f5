import { afterAll, beforeAll, describe } from '@jest/globals';
import { Controller, Inject, type INestMicroservice } from '@nestjs/common';
import { ClientProxyFactory, type ClientProxy, MessagePattern, Payload, Transport } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import mysql from 'mysql2/promise';
import type { AddressInfo, Server } from 'node:net';
import { lastValueFrom } from 'rxjs';
import { Idempotent, IdempotencyModule, MySqlStore } from '../../lib/index.js';
import { MySqlServer, mysqlAvailable } from '../support/mysql-server.js';
import { MySqlTransactions } from '../support/mysql-transactions.js';
import { shippingScenarios } from '../support/shipping-scenarios.js';

const describeMy = mysqlAvailable('transactional message handlers on MySQL') ? describe : describe.skip;

let server: MySqlServer;
let pool: mysql.Pool;
const failing = new Set<string>();

@Controller()
class ShippingConsumer {
  constructor(@Inject(MySqlTransactions) private readonly tx: MySqlTransactions) {}

  /** The business write goes through the transaction the module opened for the message. */
  @MessagePattern('ship')
  @Idempotent({ transactional: true })
  async ship(@Payload() data: { idempotencyKey: string; order: string }) {
    const [result] = (await this.tx.connection.query('INSERT INTO shipments (order_id) VALUES (?)', [data.order])) as [
      { insertId: number },
      unknown,
    ];
    if (failing.delete(data.order)) throw new Error('label printer offline');
    return { shipment: result.insertId };
  }
}

// A transactional message handler on MySQL, over a real TCP microservice: the inbox record commits in
// the handler's transaction, as on PostgreSQL (test/postgres/messages.postgres.spec.ts).
describeMy('@Idempotent({ transactional: true }) message handlers on MySQL', () => {
  let service: INestMicroservice;
  let client: ClientProxy;
  beforeAll(async () => {
    server = await MySqlServer.start();
    const url = await server.createDatabase(`messages_${process.pid}`);
    pool = mysql.createPool({ uri: url, connectionLimit: 8 });
    await pool.query('CREATE TABLE shipments (id INT AUTO_INCREMENT PRIMARY KEY, order_id VARCHAR(255) NOT NULL)');
    const tx = new MySqlTransactions(pool);
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ store: new MySqlStore({ pool, sweepIntervalMs: 0 }), transactions: tx })],
      controllers: [ShippingConsumer],
      providers: [{ provide: MySqlTransactions, useValue: tx }],
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
  }, 120_000);
  afterAll(async () => {
    client?.close();
    await service?.close();
    await pool?.end();
    await server?.destroy();
  });

  const ship = (order: string) => lastValueFrom(client.send<unknown>('ship', { idempotencyKey: `m-${order}`, order }));
  const shipments = async (order: string) =>
    Number(((await pool.query('SELECT count(*) AS n FROM shipments WHERE order_id = ?', [order]))[0] as { n: number }[])[0].n);

  shippingScenarios(() => ({ ship, shipments, failing }));
});
