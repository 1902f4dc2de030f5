import { Column, CreateDateColumn, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/** One charge of the ledger sample, written by the handler inside its transaction. */
@Entity({ name: 'charges' })
export class Charge {
  @PrimaryGeneratedColumn()
  id!: number;

  // varchar, not text: MySQL indexes a text column only by a prefix.
  @Index()
  @Column({ name: 'account_id', type: 'varchar', length: 255 })
  accountId!: string;

  @Index()
  @Column({ name: 'idempotency_key', type: 'varchar', length: 255 })
  idempotencyKey!: string;

  @Column({ type: 'integer' })
  amount!: number;

  @Column({ type: 'varchar', length: 16 })
  currency!: string;

  // The driver's own timestamp type (timestamptz has no MySQL spelling).
  @CreateDateColumn({ name: 'created_at' })
  createdAt!: Date;
}
