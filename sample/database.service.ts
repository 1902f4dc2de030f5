import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import Database from 'better-sqlite3';

export const DATABASE_PATH = Symbol('DATABASE_PATH');

export interface PaymentRow {
  id: number;
  account: string;
  amount: number;
  currency: string;
  idempotency_key: string;
  created_at: string;
}

export interface OrderRow {
  id: number;
  account: string;
  item: string;
  quantity: number;
  idempotency_key: string;
  created_at: string;
}

/** The sample's persistence: SQLite, parameterised statements only. */
@Injectable()
export class DatabaseService implements OnApplicationShutdown {
  private readonly db: Database.Database;
  private readonly insertPayment: Database.Statement;
  private readonly insertOrder: Database.Statement;

  constructor(@Inject(DATABASE_PATH) path: string) {
    this.db = new Database(path);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('busy_timeout = 5000');
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS payments (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        account TEXT NOT NULL,
        amount INTEGER NOT NULL,
        currency TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        created_at TEXT NOT NULL
      );
      CREATE TABLE IF NOT EXISTS orders (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        account TEXT NOT NULL,
        item TEXT NOT NULL,
        quantity INTEGER NOT NULL,
        idempotency_key TEXT NOT NULL,
        created_at TEXT NOT NULL
      );
    `);
    this.insertPayment = this.db.prepare(
      'INSERT INTO payments (account, amount, currency, idempotency_key, created_at) VALUES (?, ?, ?, ?, ?) RETURNING *',
    );
    this.insertOrder = this.db.prepare(
      'INSERT INTO orders (account, item, quantity, idempotency_key, created_at) VALUES (?, ?, ?, ?, ?) RETURNING *',
    );
  }

  addPayment(account: string, amount: number, currency: string, key: string): PaymentRow {
    return this.insertPayment.get(account, amount, currency, key, new Date().toISOString()) as PaymentRow;
  }

  addOrder(account: string, item: string, quantity: number, key: string): OrderRow {
    return this.insertOrder.get(account, item, quantity, key, new Date().toISOString()) as OrderRow;
  }

  payments(account: string): PaymentRow[] {
    return this.db.prepare('SELECT * FROM payments WHERE account = ? ORDER BY id').all(account) as PaymentRow[];
  }

  orders(account: string): OrderRow[] {
    return this.db.prepare('SELECT * FROM orders WHERE account = ? ORDER BY id').all(account) as OrderRow[];
  }

  /** Rows per idempotency key, for "one payment per key" checks. */
  paymentCountsByKey(): Map<string, number> {
    const rows = this.db.prepare('SELECT idempotency_key AS key, COUNT(*) AS n FROM payments GROUP BY idempotency_key').all() as {
      key: string;
      n: number;
    }[];
    return new Map(rows.map((r) => [r.key, r.n]));
  }

  /** The open database, for the idempotency store that keeps its records beside the payments. */
  get connection(): Database.Database {
    return this.db;
  }

  /**
   * Closed once the HTTP server has drained, not in onModuleDestroy (which Nest runs first): a
   * handler still running during a graceful shutdown must still be able to write its payment.
   */
  onApplicationShutdown(): void {
    this.db.close();
  }
}
