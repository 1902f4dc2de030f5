import { CONFIG_ERRORS } from '../../shared/messages/config.messages.js';
import type { CacheSetOptions, InMemoryStoreOptions } from './in-memory-store.options.js';

// Eviction takes queues in this order: plain before guaranteed, and within each, entries never read
// (oldest insert first) before read ones (least recently read first). Only a read moves an entry.
// Pinned entries wait in queues of their own that eviction never takes from while they are live
// (the idempotency store pins its claims: evicting one would let a duplicate run the handler while
// the first still runs).
const PLAIN = 0;
/** Queue bit: evicted only once no plain entry is left. */
export const GUARANTEED = 2;
/** Queue bit: the entry has been read since it was written. */
export const READ = 1;
const EVICTABLE_QUEUES = 4;
/** First queue that eviction leaves alone while its entries are live. */
export const PINNED = 4;
const QUEUES = 6;

/** The kind of an entry written by `set`; subclasses tag their own entries with other numbers. */
export const PLAIN_KIND = 0;

/** One cached value. `kind` tells its writer what `value` is. */
export class Entry {
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

/**
 * A general-purpose cache bounded by entry count, O(1) per operation, with lazy expiry (no timers),
 * per-prefix quotas and guaranteed entries. `InMemoryStore` builds the idempotency store on it.
 */
export class BoundedLru {
  private readonly entries = new Map<string, Entry>();
  private readonly groups: Group[];
  private readonly quotaGroups: Group[];
  private readonly defaultGroup = new Group('', -1);
  private readonly maxEntries: number;
  protected readonly now: () => number;
  private stamp = 0;

  constructor(options: InMemoryStoreOptions = {}) {
    const maxEntries = options.maxEntries ?? 10_000;
    if (!Number.isSafeInteger(maxEntries) || maxEntries < 1) throw new Error(CONFIG_ERRORS.maxEntries(maxEntries));
    let reserved = 0;
    const quotaGroups: Group[] = [];
    for (const [prefix, quota] of Object.entries(options.prefixQuotas ?? {})) {
      if (prefix === '' || !Number.isSafeInteger(quota) || quota < 0) throw new Error(CONFIG_ERRORS.quotas);
      reserved += quota;
      quotaGroups.push(new Group(prefix, quota));
    }
    if (reserved > maxEntries) throw new Error(CONFIG_ERRORS.quotasTooLarge(reserved, maxEntries));
    // Longest prefix first, so that 'idem:a:' wins over 'idem:' for a key under both.
    quotaGroups.sort((a, b) => b.prefix.length - a.prefix.length);
    this.quotaGroups = quotaGroups;
    this.groups = [...quotaGroups, this.defaultGroup];
    this.maxEntries = maxEntries;
    this.now = options.now ?? Date.now;
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
    if (!e) return this.insert(key, value, PLAIN_KIND, expiresAt, queue) !== null;
    e.value = value;
    e.kind = PLAIN_KIND;
    e.expiresAt = expiresAt;
    if ((e.queue & ~READ) !== queue) this.move(e, queue | (e.queue & READ));
    return true;
  }

  /** Stores `value` only when `key` holds nothing live. Does not mark anything as used. */
  setIfAbsent(key: string, value: unknown, options: CacheSetOptions = {}): boolean {
    if (this.live(key)) return false;
    const queue = options.guaranteed ? GUARANTEED : PLAIN;
    return this.insert(key, value, PLAIN_KIND, this.expiry(options.ttlMs), queue) !== null;
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

  /** Epoch ms at which an entry written now with `ttlMs` expires; never without one. */
  protected expiry(ttlMs: number | undefined): number {
    return ttlMs === undefined ? Infinity : this.now() + ttlMs;
  }

  /** The entry under `key` unless it has expired (an expired one is dropped on the way). */
  protected live(key: string): Entry | undefined {
    const e = this.entries.get(key);
    if (e && e.expiresAt <= this.now()) {
      this.drop(e);
      return undefined;
    }
    return e;
  }

  /** The entry under `key`, expired or not: an expired claim is still its owner's until another takes the key. */
  protected held(key: string): Entry | undefined {
    return this.entries.get(key);
  }

  /** Adds an entry, evicting one at the bound; `null` when nothing may be evicted. */
  protected insert(key: string, value: unknown, kind: number, expiresAt: number, queue: number): Entry | null {
    const group = this.groupOf(key);
    if (this.entries.size >= this.maxEntries && !this.evictOne(group)) return null;
    const e = new Entry(key, value, kind, expiresAt, queue, ++this.stamp, group);
    group.queues[queue].push(e);
    group.count++;
    this.entries.set(key, e);
    return e;
  }

  /** Marks the entry as read now. */
  protected touch(e: Entry): void {
    e.stamp = ++this.stamp;
    this.move(e, e.queue | READ);
  }

  protected move(e: Entry, queue: number): void {
    const queues = e.group.queues;
    queues[e.queue].unlink(e);
    e.queue = queue;
    queues[queue].push(e);
  }

  protected drop(e: Entry): void {
    e.group.queues[e.queue].unlink(e);
    e.group.count--;
    this.entries.delete(e.key);
  }

  /** Called for each live entry evicted to make room (not for expired ones). */
  protected evicted(_e: Entry): void {}

  private groupOf(key: string): Group {
    for (const g of this.quotaGroups) if (key.startsWith(g.prefix)) return g;
    return this.defaultGroup;
  }

  /**
   * Evicts the first entry in eviction order whose prefix is not protected by its quota; failing
   * that, a pinned entry that has expired.
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
        this.evicted(victim);
        return true;
      }
    }
    const now = this.now();
    for (const g of this.groups) {
      for (let q = PINNED; q < QUEUES; q++) {
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
}
