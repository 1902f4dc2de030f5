import type { StoredResponse } from '../../shared/interfaces/stored-response.interface.js';

/** What a completed request leaves in the store. */
export interface IdempotencyRecord {
  /** Fingerprint of the request that produced {@link response}; a retry must match it. */
  readonly fingerprint: string;
  readonly response: StoredResponse;
  /**
   * With the module's `encryption` on: the response, sealed (key id, IV, tag, ciphertext), and
   * `response` empty (status 0, no headers, no body). A store keeps it as it keeps the rest.
   */
  readonly sealed?: Buffer;
}

/** A key and the owner token of the claim on it, for `renewAll` (see {@link BatchRenewal}). */
export interface OwnedKey {
  readonly key: string;
  readonly owner: string;
}

/** A claim on a key while its first request runs. */
export interface IdempotencyClaim {
  /** Random token of the claimant: commit, release and renew act only for this owner. */
  readonly owner: string;
  readonly fingerprint: string;
  /** How long the claim lives unless renewed, in ms. */
  readonly leaseMs: number;
}

/** The answer to `IdempotencyStore.claim`. */
export type ClaimOutcome =
  /** The key was free and is now the caller's. */
  | { readonly state: 'claimed' }
  /** Another request holds the key and has not finished. */
  | { readonly state: 'in-flight'; readonly fingerprint: string }
  /** A request with this key finished; its record is returned. */
  | { readonly state: 'completed'; readonly record: IdempotencyRecord }
  /**
   * A request with this key finished, but its record cannot be read here: it was written in a newer
   * format (a rolling deploy is under way). The key is neither replayed nor taken over.
   */
  | { readonly state: 'unreadable'; readonly reason: string };

/** What a key holds: a claim or a record (readable or not). */
export type HeldEntry = Exclude<ClaimOutcome, { state: 'claimed' }>;

/** What `peek` (see {@link Inspection}) finds under a key: its claim or record, and when that expires (epoch ms). */
export type PeekedEntry = HeldEntry & { readonly expiresAt: number };

/** What the application's routes need of a store, for `ping` (see {@link HealthCheck}). */
export interface StoreNeeds {
  /** Some route has `atomicPhases: true` (or a completer runs): `recoveryPoint` and the rest must work. */
  readonly recoveryPoints?: boolean;
  /**
   * The largest response body the module keeps (`maxResponseBytes`), given to `open`: a store whose
   * server bounds a value below what such a record needs refuses to start.
   */
  readonly maxResponseBytes?: number;
}
