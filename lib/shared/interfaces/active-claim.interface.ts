/** A key this process holds while its handler runs. */
export interface ActiveClaim {
  /** The key as the client sent it (validated). */
  readonly key: string;
  /** The key in the store: prefix, escaped scope and key. */
  readonly storeKey: string;
  /** Random token that fences every later store call to this claim. */
  readonly owner: string;
  readonly fingerprint: string;
  /** How long the committed record is kept, in ms. */
  readonly ttlMs: number;
  /** The handler (`Controller.method`), for log lines. */
  readonly route: string;
  /** How long the claim lives unless renewed, in ms. */
  readonly leaseMs: number;
  /** When the key was claimed (epoch ms): renewal stops `maxHoldMs` after it. */
  readonly claimedAt: number;
  /** The request's HTTP method, for events; `undefined` outside HTTP. */
  readonly method: string | undefined;
  /** Wakes duplicates waiting for the key (`inFlight: 'wait'`) once it is committed or released. */
  readonly onSettled?: (storeKey: string) => void;
  /** A commit or release is under way: a renewal that finds the claim gone is no loss. */
  settling?: boolean;
  /** A renewal found the claim gone while the handler ran: another request may hold the key now. */
  lost?: boolean;
  /** Time spent waiting for the store so far, in ms; counted only while something observes outcomes. */
  storeMs: number;
}
