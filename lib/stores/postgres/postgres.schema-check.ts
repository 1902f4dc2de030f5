import type { Logger } from '@nestjs/common';
import type { StoreNeeds } from '../contract/idempotency-store.interface.js';
import { FAILURES, LOGS } from '../../shared/messages/operator.messages.js';
import type { PostgresPoolLike } from './postgres-store.options.js';
import { CLAIM_SUFFIX, derivedName, type PostgresNames } from './postgres.schema.js';
import {
  createPostgresSchema,
  postgresMigrationsSql,
  type PostgresTableFound,
  verifyPostgresTable,
} from './postgres.verifier.js';

/**
 * The PostgreSQL store's schema as the last check found it: created (with `createSchema`) and
 * checked when the store connects, checked again by each health check, which also says when the
 * recovery points the routes need are not there.
 */
export class PostgresSchemaCheck {
  private found: PostgresTableFound | undefined;

  constructor(
    private readonly names: PostgresNames,
    private readonly timeoutMs: number,
  ) {}

  /** Migrations 001 to 004 for the store's names. */
  sql(): string {
    return postgresMigrationsSql(this.names);
  }

  /** The recovery points' table exists (migration 002): forget and the sweep delete from it too. Read once connected. */
  get hasPhases(): boolean {
    return this.found!.phases;
  }

  /** At connect: creates the schema unless told not to, refuses one this release cannot use. */
  async open(pool: PostgresPoolLike, create: boolean, logger: Logger): Promise<void> {
    if (create) await createPostgresSchema(pool, this.sql());
    await this.check(pool);
    const { schema, table } = this.names;
    if (!this.found!.claimReadsFirst) logger.warn(LOGS.claimWrites(`"${schema}"."${derivedName(table, CLAIM_SUFFIX)}"`));
  }

  /** Checks the schema again; rejects when it cannot serve `needs`. */
  async check(pool: PostgresPoolLike, needs?: StoreNeeds): Promise<void> {
    this.found = await verifyPostgresTable(pool, this.names, this.timeoutMs);
    const missing = this.found.phasesMissing;
    if (needs?.recoveryPoints && missing) throw new Error(FAILURES.phasesUnusable('PostgresStore', missing));
  }
}
