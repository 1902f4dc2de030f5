/** What an `atomicPhases` run has committed so far: the store's recovery point for its key. */
export interface RecoveryPoint {
  /** The fingerprint of the request that started the run: a retry with another request is refused (422). */
  readonly fingerprint: string;
  /** Each committed phase's result, by phase name, as JSON values. */
  readonly results: Readonly<Record<string, unknown>>;
}

/** One phase's result, as a store adds it to the recovery point of the caller's claim. */
export interface PhaseAdvance {
  readonly fingerprint: string;
  readonly phase: string;
  /** The result as JSON text. */
  readonly result: string;
  /** The claim's lease, renewed by the same statement. */
  readonly leaseMs: number;
  /** How long the recovery point is kept from now: the route's ttl. */
  readonly ttlMs: number;
}
