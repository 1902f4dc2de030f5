import type { SqlExecutor } from '../../shared/interfaces/idempotency-transactions.interface.js';
import { LaneBatch } from '../shared/lane.batch.js';
import type { AdmittedSend } from './postgres.claims.js';
import type { Completion, PostgresCompletions } from './postgres.completions.js';
import { LARGE_RECORD_BYTES, onSizedConnection } from './postgres.large-records.js';
import { type PostgresPoolLike, SERVER_FIRST_MS } from './postgres-store.options.js';
import { type PoolLanes, URGENT } from '../shared/pool.lanes.js';

/** The most commits one statement carries. */
const MAX_COMMIT_BATCH = 32;

/** Records up to this size ride in a batch (at most 2 MiB in one statement); a larger one goes alone. */
const BATCHED_RECORD_BYTES = 64 * 1024;

/**
 * `PostgresStore`'s commits on its own pool, in the urgent lane (a finished handler's commit never
 * waits behind new claims): those that waited for a connection together in one statement
 * ({@link LaneBatch}), each fenced on its own; a record over 64 KiB alone, and one over 1 MiB on a
 * connection of its own whose statement timeout is scaled to its size.
 */
export class PostgresCommits {
  private readonly batch: LaneBatch<Completion, boolean>;
  private readonly admitted: SqlExecutor;

  /**
   * @param send runs a statement on a connection the lane has admitted.
   * @param timeoutMs the store's statement timeout.
   */
  constructor(
    private readonly completions: PostgresCompletions,
    private readonly lanes: () => PoolLanes,
    send: AdmittedSend,
    private readonly pool: () => Promise<PostgresPoolLike>,
    private readonly timeoutMs: number,
  ) {
    this.admitted = { query: send };
    this.batch = new LaneBatch(lanes, URGENT, MAX_COMMIT_BATCH, (commits) => this.send(commits));
  }

  async commit(commit: Completion): Promise<boolean> {
    if (commit.value.length <= BATCHED_RECORD_BYTES) return this.batch.add(commit);
    const pool = await this.pool();
    const { key, owner, value, ttlMs } = commit;
    return this.lanes().run(URGENT, () =>
      pool.connect && value.length > LARGE_RECORD_BYTES
        ? onSizedConnection(pool, this.timeoutMs, SERVER_FIRST_MS, value.length, (sql) =>
            this.completions.complete(sql, key, owner, value, ttlMs),
          )
        : this.completions.complete(this.admitted, key, owner, value, ttlMs),
    );
  }

  private async send(commits: readonly Completion[]): Promise<boolean[]> {
    if (commits.length > 1) return this.completions.completeAll(this.admitted, commits);
    const [{ key, owner, value, ttlMs }] = commits;
    return [await this.completions.complete(this.admitted, key, owner, value, ttlMs)];
  }
}
