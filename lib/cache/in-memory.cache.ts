import { Logger } from '@nestjs/common';
import { FOREIGN_VALUE } from '../idempotency.messages.js';
import type {
  ClaimOutcome,
  IdempotencyClaim,
  IdempotencyRecord,
  IdempotencyStore,
} from './idempotency-store.interface.js';
import { decodeRecord, encodeRecord } from './record-codec.js';

/** Options of {@link InMemoryCache}. */
export interface InMemoryCacheOptions {
  /** Most entries held at once; an insert at the bound evicts one (see the README's "Eviction"). Default 10 000. */
  maxEntries?: number;
  /**
   * Capacity reserved per key prefix, e.g. `{ 'idem:': 8000, 'rl:': 2000 }`. An insert never evicts an entry
   * of a prefix that holds no more than its quota, unless the inserted key has that same prefix.
   * The quotas may add up to `maxEntries` at most.
   */
  prefixQuotas?: Readonly<Record<string, number>>;
  /** Clock in epoch ms; tests inject one. Default `Date.now`. */
  now?: () => number;
}

/** Options of {@link InMemoryCache.set} and {@link InMemoryCache.setIfAbsent}. */
export interface CacheSetOptions {
  /** Lifetime in ms; without it the entry lives until evicted or deleted. */
  ttlMs?: number;
  /** A guaranteed entry is evicted only once no plain entry is left to take. Default `false`. */
  guaranteed?: boolean;
}

// Eviction takes queues in this order: plain before guaranteed, and within each, entries never read
// (oldest insert first) before read ones (least recently read first). Only a read moves an entry.
// Claims wait in queues of their own that eviction never takes from while they are live: evicting
// one would let a duplicate run the handler while the first still runs.
const PLAIN = 0;
const GUARANTEED = 2;
const READ = 1;
const EVICTABLE_QUEUES = 4;
const IN_FLIGHT = 4;
const QUEUES = 6;

const PLAIN_VALUE = 0;
const CLAIM = 1;
const RECORD = 2;

class Entry {
  prev: Entry | null = null;
  next: Entry | null = null;
  constructor(
    readonly key: string,
    public value: unknown,
    public kind: number,
    public expiresAt: number,
    public queue: number,
    public stamp: number,
    readonly group: Group,
  ) {}
}

/** An intrusive doubly linked list: O(1) append, unlink and oldest. */
class Queue {
  head: Entry | null = null;
  tail: Entry | null = null;

  push(e: Entry): void {
    e.prev = this.tail;
    e.next = null;
    if (this.tail) this.tail.next = e;
    else this.head = e;
    this.tail = e;
  }

  unlink(e: Entry): void {
    if (e.prev) e.prev.next = e.next;
    else this.head = e.next;
    if (e.next) e.next.prev = e.prev;
    else this.tail = e.prev;
    e.prev = e.next = null;
  }
}

/** The entries of one quota prefix (or of no quota prefix: `quota` -1, never protected). */
class Group {
  count = 0;
  readonly queues: Queue[] = Array.from({ length: QUEUES }, () => new Queue());
  constructor(
    readonly prefix: string,
    readonly quota: number,
  ) {}
}

class Claim {
  constructor(
    readonly owner: string,
    readonly fingerprint: string,
  ) {}
}

let productionWarningGiven = false;
const logger = new Logger('InMemoryCache');

/**
 * A process-local LRU store, bounded by entry count, O(1) per operation, with lazy expiry (no timers).
 * It is both a small general cache (`get`/`set`/`setIfAbsent`/`delete`) and an {@link IdempotencyStore}.
 * State is per process: with several pods, use `RedisCache`.
 */
export class InMemoryCache implements IdempotencyStore {
  private readonly entries = new Map<string, Entry>();
  private readonly groups: Group[];
  private readonly quotaGroups: Group[];
  private readonly defaultGroup = new Group('', -1);
  private readonly maxEntries: number;
  private readonly now: () => number;
  private stamp = 0;

  constructor(options: InMemoryCacheOptions = {}) {
    const maxEntries = options.maxEntries ?? 10_000;
    if (!Number.isSafeInteger(maxEntries) || maxEntries < 1) {
      throw new Error(`InMemoryCache: maxEntries must be a positive integer, got ${String(maxEntries)}`);
    }
    let reserved = 0;
    const quotaGroups: Group[] = [];
    for (const [prefix, quota] of Object.entries(options.prefixQuotas ?? {})) {
      if (prefix === '' || !Number.isSafeInteger(quota) || quota < 0) {
        throw new Error('InMemoryCache: prefixQuotas needs non-empty prefixes and non-negative integer quotas');
      }
      reserved += quota;
      quotaGroups.push(new Group(prefix, quota));
    }
    if (reserved > maxEntries) {
      throw new Error(`InMemoryCache: prefixQuotas reserve ${reserved} entries, more than maxEntries (${maxEntries})`);
    }
    // Longest prefix first, so that 'idem:a:' wins over 'idem:' for a key under both.
    quotaGroups.sort((a, b) => b.prefix.length - a.prefix.length);
    this.quotaGroups = quotaGroups;
    this.groups = [...quotaGroups, this.defaultGroup];
    this.maxEntries = maxEntries;
    this.now = options.now ?? Date.now;
    if (process.env.NODE_ENV === 'production' && !productionWarningGiven) {
      productionWarningGiven = true;
      logger.warn(
        'InMemoryCache keeps idempotency state per process: a retry that reaches another pod runs again. Use RedisCache with more than one instance.',
      );
    }
  }

  /** Number of entries held, expired ones not yet swept included. */
  get size(): number {
    return this.entries.size;
  }

  /** Keys held, expired ones not yet swept included; does not mark anything as used. */
  keys(): IterableIterator<string> {
    return this.entries.keys();
  }

  /** Returns a live value and marks it recently used. */
  get<T = unknown>(key: string): T | undefined {
    const e = this.live(key);
    if (!e) return undefined;
    this.touch(e);
    return e.value as T;
  }

  /** Stores a plain value; an existing entry keeps its place in the eviction order. Returns `false` when nothing could be evicted to make room. */
  set(key: string, value: unknown, options: CacheSetOptions = {}): boolean {
    const e = this.live(key);
    const queue = options.guaranteed ? GUARANTEED : PLAIN;
    const expiresAt = this.expiry(options.ttlMs);
    if (!e) return this.insert(key, value, PLAIN_VALUE, expiresAt, queue) !== null;
    e.value = value;
    e.kind = PLAIN_VALUE;
    e.expiresAt = expiresAt;
    if ((e.queue & ~READ) !== queue) this.move(e, queue | (e.queue & READ));
    return true;
  }

  /** Stores `value` only when `key` holds nothing live. Does not mark anything as used. */
  setIfAbsent(key: string, value: unknown, options: CacheSetOptions = {}): boolean {
    if (this.live(key)) return false;
    const queue = options.guaranteed ? GUARANTEED : PLAIN;
    return this.insert(key, value, PLAIN_VALUE, this.expiry(options.ttlMs), queue) !== null;
  }

  delete(key: string): boolean {
    const e = this.entries.get(key);
    if (!e) return false;
    this.drop(e);
    return true;
  }

  clear(): void {
    for (const e of [...this.entries.values()]) this.drop(e);
  }

  async claim(key: string, claim: IdempotencyClaim): Promise<ClaimOutcome> {
    const e = this.live(key);
    if (e && e.kind !== PLAIN_VALUE) {
      this.touch(e);
      if (e.kind === RECORD) return { state: 'completed', record: decodeRecord(Buffer.from(e.value as string, 'latin1')) };
      return { state: 'in-flight', fingerprint: (e.value as Claim).fingerprint };
    }
    if (e) {
      // Not written by the idempotency layer: no claim or record of ours, so the key is free.
      logger.warn(FOREIGN_VALUE);
      this.drop(e);
    }
    const value = new Claim(claim.owner, claim.fingerprint);
    if (this.insert(key, value, CLAIM, this.expiry(claim.leaseMs), IN_FLIGHT) === null) {
      throw new Error('InMemoryCache is full: every entry is a claim in flight or kept by its prefix quota');
    }
    return { state: 'claimed' };
  }

  async commit(key: string, owner: string, record: IdempotencyRecord, ttlMs: number): Promise<boolean> {
    const e = this.ownClaim(key, owner);
    if (!e) return false;
    // The record takes the claim's entry: the two count as one. Packed into one one-byte string (a
    // byte per char), it costs far less heap than its objects or a Buffer (bench/: heap per record).
    e.value = encodeRecord(record).toString('latin1');
    e.kind = RECORD;
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

  async close(): Promise<void> {}

  private ownClaim(key: string, owner: string): Entry | undefined {
    const e = this.live(key);
    return e && e.kind === CLAIM && (e.value as Claim).owner === owner ? e : undefined;
  }

  private expiry(ttlMs: number | undefined): number {
    return ttlMs === undefined ? Infinity : this.now() + ttlMs;
  }

  private live(key: string): Entry | undefined {
    const e = this.entries.get(key);
    if (e && e.expiresAt <= this.now()) {
      this.drop(e);
      return undefined;
    }
    return e;
  }

  private groupOf(key: string): Group {
    for (const g of this.quotaGroups) if (key.startsWith(g.prefix)) return g;
    return this.defaultGroup;
  }

  private insert(key: string, value: unknown, kind: number, expiresAt: number, queue: number): Entry | null {
    const group = this.groupOf(key);
    if (this.entries.size >= this.maxEntries && !this.evictOne(group)) return null;
    const e = new Entry(key, value, kind, expiresAt, queue, ++this.stamp, group);
    group.queues[queue].push(e);
    group.count++;
    this.entries.set(key, e);
    return e;
  }

  /**
   * Evicts the first entry in eviction order whose prefix is not protected by its quota; failing
   * that, a claim whose lease has run out.
   */
  private evictOne(inserting: Group): boolean {
    for (let q = 0; q < EVICTABLE_QUEUES; q++) {
      let victim: Entry | null = null;
      for (const g of this.groups) {
        if (g !== inserting && g.count <= g.quota) continue;
        const head = g.queues[q].head;
        if (head && (!victim || head.stamp < victim.stamp)) victim = head;
      }
      if (victim) {
        this.drop(victim);
        return true;
      }
    }
    const now = this.now();
    for (const g of this.groups) {
      for (let q = IN_FLIGHT; q < QUEUES; q++) {
        for (let e = g.queues[q].head; e; e = e.next) {
          if (e.expiresAt <= now) {
            this.drop(e);
            return true;
          }
        }
      }
    }
    return false;
  }

  private touch(e: Entry): void {
    e.stamp = ++this.stamp;
    this.move(e, e.queue | READ);
  }

  private move(e: Entry, queue: number): void {
    const queues = e.group.queues;
    queues[e.queue].unlink(e);
    e.queue = queue;
    queues[queue].push(e);
  }

  private drop(e: Entry): void {
    e.group.queues[e.queue].unlink(e);
    e.group.count--;
    this.entries.delete(e.key);
  }
}
