import { Logger } from '@nestjs/common';
import { LOGS, FAILURES } from '../../shared/messages/operator.messages.js';
import type {
  ClaimOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
  IdempotencyStore,
  HeldEntry,
  OwnedKey,
  PeekedEntry,
} from '../contract/idempotency-store.interface.js';
import { BoundedLru, type Entry, GUARANTEED, PINNED, PLAIN_KIND, READ } from './bounded-lru.js';
import type { InMemoryStoreOptions } from './in-memory-store.options.js';
import { encodeRecord, readRecord } from '../shared/store-value.codec.js';
import { TurnAnswers } from '../shared/turn.answers.js';

/** Entry kinds besides the plain values of `set` (see {@link PLAIN_KIND}). */
const CLAIM_KIND = 1;
const RECORD_KIND = 2;

class Claim {
  constructor(
    readonly owner: string,
    readonly fingerprint: string,
  ) {}
}

let productionWarningGiven = false;
const logger = new Logger('InMemoryStore');

/**
 * A process-local {@link IdempotencyStore} on a bounded LRU: O(1) per operation, lazy expiry (no
 * timers), claims never evicted while live, records kept over plain values. It is also a small
 * general cache (`get`/`set`/`setIfAbsent`/`delete`). State is per process: with several pods, use
 * `RedisStore`.
 */
export class InMemoryStore extends BoundedLru implements IdempotencyStore {
  private evictionListener: ((key: string) => void) | undefined;
  private readonly answers = new TurnAnswers();

  constructor(options: InMemoryStoreOptions = {}) {
    super(options);
    if (process.env.NODE_ENV === 'production' && !productionWarningGiven) {
      productionWarningGiven = true;
      logger.warn(LOGS.perProcess);
    }
  }

  /**
   * Decided at once, in the order asked (the first of two claims of a key claims it); answered with
   * the other claims of the turn, in its check phase (see `TurnAnswers`).
   */
  async claim(key: string, claim: IdempotencyClaim): Promise<ClaimOutcome> {
    return this.answers.later(this.decide(key, claim));
  }

  private decide(key: string, claim: IdempotencyClaim): ClaimOutcome {
    const e = this.live(key);
    if (e && e.kind !== PLAIN_KIND) {
      this.touch(e);
      return this.outcomeOf(e);
    }
    if (e) {
      // Not written by the idempotency layer: no claim or record of ours, so the key is free.
      logger.warn(LOGS.foreignValue);
      this.drop(e);
    }
    const value = new Claim(claim.owner, claim.fingerprint);
    if (this.insert(key, value, CLAIM_KIND, this.expiry(claim.leaseMs), PINNED) === null) {
      throw new Error(FAILURES.memoryFull);
    }
    return { state: 'claimed' };
  }

  async commit(key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean> {
    const e = this.ownClaim(key, owner);
    if (!e) return false;
    // The record takes the claim's entry: the two count as one. Packed into one one-byte string (a
    // byte per char), it costs far less heap than its objects or a Buffer (bench/: heap per record).
    e.value = encodeRecord(record).toString('latin1');
    e.kind = RECORD_KIND;
    e.expiresAt = this.expiry(ttlMs);
    this.move(e, GUARANTEED | (e.queue & READ));
    return true;
  }

  async release(key: string, owner: string): Promise<boolean> {
    const e = this.ownClaim(key, owner);
    if (!e) return false;
    this.drop(e);
    return true;
  }

  async renew(key: string, owner: string, leaseMs: number): Promise<boolean> {
    const e = this.ownClaim(key, owner);
    if (!e) return false;
    e.expiresAt = this.expiry(leaseMs);
    return true;
  }

  async renewAll(claims: readonly OwnedKey[], leaseMs: number): Promise<boolean[]> {
    return Promise.all(claims.map((c) => this.renew(c.key, c.owner, leaseMs)));
  }

  /** Calls `listener` with the store key of each record evicted to make room before its ttl ended. */
  watchEvictions(listener: (key: string) => void): void {
    this.evictionListener = listener;
  }

  protected override evicted(e: Entry): void {
    if (e.kind === RECORD_KIND) this.evictionListener?.(e.key);
  }

  /** Always answers: the store is this process's memory. */
  async ping(): Promise<void> {}

  async peek(key: string): Promise<PeekedEntry | undefined> {
    const e = this.live(key);
    return e && e.kind !== PLAIN_KIND ? { ...this.outcomeOf(e), expiresAt: e.expiresAt } : undefined;
  }

  async forget(key: string): Promise<boolean> {
    const e = this.live(key);
    if (!e || e.kind === PLAIN_KIND) return false;
    this.drop(e);
    return true;
  }

  async close(): Promise<void> {}

  private outcomeOf(e: Entry): HeldEntry {
    if (e.kind === RECORD_KIND) return readRecord(Buffer.from(e.value as string, 'latin1'));
    return { state: 'in-flight', fingerprint: (e.value as Claim).fingerprint };
  }

  // Past its lease too: the owner token is the fence, and expiry only lets a new claimant take over.
  private ownClaim(key: string, owner: string): Entry | undefined {
    const e = this.held(key);
    return e && e.kind === CLAIM_KIND && (e.value as Claim).owner === owner ? e : undefined;
  }
}
