import type { OwnedKey } from '../contract/idempotency-store.interface.js';

/** Runs one prepared statement and returns what mysql2 answers (rows, or a result header). */
export type MySqlSend = (sql: string, values: unknown[]) => Promise<unknown>;

/**
 * The shapes a renewal is sent in: a batch is padded to the next of these (its last claim repeated,
 * harmless in an `IN` list), so a few prepared statements serve every batch size.
 */
const SHAPES = [1, 8, 64] as const;
const LARGEST = SHAPES[SHAPES.length - 1];

const pairs = (n: number) => Array.from({ length: n }, () => '(?, ?)').join(', ');

/**
 * `MySqlStore`'s renewal of many claims: one UPDATE per 64 claims, fenced by owner. MySQL has no
 * `RETURNING`: when the UPDATE matched every claim (the usual tick) that is the answer; otherwise
 * one SELECT says which claims are still the caller's. A claim committed in between reads as not
 * renewed, which the lease renewer already takes for a settled claim, not a lost one.
 */
export class MySqlRenewals {
  constructor(
    private readonly table: string,
    private readonly send: MySqlSend,
  ) {}

  async renew(claims: readonly OwnedKey[], leaseMs: number): Promise<boolean[]> {
    const answers: boolean[] = [];
    for (let at = 0; at < claims.length; at += LARGEST) {
      answers.push(...(await this.renewChunk(claims.slice(at, at + LARGEST), leaseMs)));
    }
    return answers;
  }

  private async renewChunk(claims: readonly OwnedKey[], leaseMs: number): Promise<boolean[]> {
    const shape = SHAPES.find((size) => size >= claims.length)!;
    const values = claims.flatMap((c) => [c.key, c.owner]);
    const last = values.slice(-2);
    while (values.length < shape * 2) values.push(...last);
    const distinct = new Set(claims.map((c) => `${c.owner}\n${c.key}`)).size;
    const header = (await this.send(
      `UPDATE \`${this.table}\` SET expires_at = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND
       WHERE state = 0 AND (\`key\`, owner) IN (${pairs(shape)})`,
      [leaseMs * 1000, ...values],
    )) as { affectedRows: number };
    if (header.affectedRows === distinct) return claims.map(() => true);
    const rows = (await this.send(
      `SELECT \`key\`, owner FROM \`${this.table}\` WHERE state = 0 AND (\`key\`, owner) IN (${pairs(shape)})`,
      values,
    )) as { key: Buffer; owner: Buffer }[];
    // Compared as the bytes the server holds; an owner holds no newline (a UUID), so owner, newline, key names one pair.
    const held = new Set(rows.map((r) => `${r.owner.toString('hex')}\n${r.key.toString('hex')}`));
    return claims.map((c) => held.has(`${Buffer.from(c.owner).toString('hex')}\n${Buffer.from(c.key).toString('hex')}`));
  }
}
