import type { ClaimOutcome, IdempotencyClaim } from '../contract/idempotency-store.interface.js';
import { FAILURES } from '../../shared/messages/operator.messages.js';
import { held, type HeldRow } from '../shared/sql.rows.js';
import type { MySqlSend } from './mysql.renewals.js';
import { claimProcedure, MAX_KEY_BYTES } from './mysql.schema.js';

/** A row of the claim procedure's answer (and of `peek`). */
export type ClaimRow = { claimed: number; state: number; fingerprint: Buffer; record: Buffer | null };

/** InnoDB's deadlock error: the victim's statement was rolled back whole, so it is sent again. */
const ER_LOCK_DEADLOCK = 1213;
/** How often a claim chosen as a deadlock's victim is sent again before it answers 503. */
const DEADLOCK_ATTEMPTS = 5;

/** The rows of a CALL's first result set, through mysql2 (`[rows, header]`) or an ORM that unwraps a level. */
export function firstRows(result: unknown): Record<string, unknown>[] {
  let value = result;
  while (Array.isArray(value) && Array.isArray(value[0])) value = value[0];
  return (Array.isArray(value) ? value : []) as Record<string, unknown>[];
}

/** A live row as the shared SQL reader takes it (mysql2 hands binary columns over as Buffers). */
export function heldRow(row: ClaimRow): HeldRow {
  return { state: Number(row.state), fingerprint: row.fingerprint.toString(), record: row.record };
}

/**
 * `MySqlStore`'s claims: one CALL of the claim procedure each. Claims of neighbouring new keys at
 * once can deadlock on the locks of InnoDB's duplicate-key checks (gap locks, even under READ
 * COMMITTED); the victim's insert was rolled back and claimed nothing, so it is sent again.
 */
export class MySqlClaims {
  constructor(
    private readonly table: string,
    private readonly send: MySqlSend,
  ) {}

  async claim(key: string, claim: IdempotencyClaim): Promise<ClaimOutcome> {
    const bytes = Buffer.byteLength(key);
    if (bytes > MAX_KEY_BYTES) throw new Error(FAILURES.mysqlKeyTooLong(bytes, MAX_KEY_BYTES));
    for (let attempt = 1; ; attempt++) {
      try {
        const [row] = firstRows(
          await this.send(`CALL \`${claimProcedure(this.table)}\`(?, ?, ?, ?)`, [
            key,
            claim.owner,
            claim.fingerprint,
            claim.leaseMs,
          ]),
        ) as ClaimRow[];
        if (Number(row.claimed) === 1) return { state: 'claimed' };
        return held(heldRow(row));
      } catch (err) {
        if ((err as { errno?: number }).errno !== ER_LOCK_DEADLOCK || attempt >= DEADLOCK_ATTEMPTS) throw err;
      }
    }
  }
}
