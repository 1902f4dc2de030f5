import { Column, CreateDateColumn, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/** One charge of the ledger sample, written by the handler inside its transaction. */
@Entity({ name: 'charges' })
export class Charge {
  @PrimaryGeneratedColumn()
  id!: number;

  @Index()
  @Column({ name: 'account_id', type: 'text' })
  accountId!: string;

  @Index()
  @Column({ name: 'idempotency_key', type: 'text' })
  idempotencyKey!: string;

  @Column({ type: 'integer' })
  amount!: number;

  @Column({ type: 'text' })
  currency!: string;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;
}
