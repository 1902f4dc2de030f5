import { Column, CreateDateColumn, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/** One ride of the ledger sample's phased route: created, then charged, then its receipt queued. */
@Entity({ name: 'rides' })
export class Ride {
  @PrimaryGeneratedColumn()
  id!: number;

  @Index()
  @Column({ name: 'account_id', type: 'text' })
  accountId!: string;

  @Column({ type: 'text' })
  origin!: string;

  @Column({ type: 'text' })
  destination!: string;

  @Column({ type: 'integer' })
  amount!: number;

  @Column({ type: 'text' })
  currency!: string;

  /** The payment provider's charge, recorded in the phase after the call. */
  @Column({ name: 'charge_id', type: 'text', nullable: true })
  chargeId!: string | null;

  /** The receipt is queued (a job row a mailer would pick up), in the run's last transaction. */
  @Column({ name: 'receipt_queued', type: 'boolean', default: false })
  receiptQueued!: boolean;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;
}
