/** What an `atomicPhases` run has committed so far: the store's recovery point for its key. */
export interface RecoveryPoint {
  /** The fingerprint of the request that started the run: a retry with another request is refused (422). */
  readonly fingerprint: string;
  /** Each committed phase's result, by phase name, as JSON values. */
  readonly results: Readonly<Record<string, unknown>>;
  /**
   * The names of {@link results} in the order the phases committed; without it, the order of
   * `results`' keys (a store that cannot tell leaves it out).
   */
  readonly phases?: readonly string[];
  /** The `@PhasedWorkflow()` the run is, when it is one: what a completer runs again, with its `input`. */
  readonly workflow?: string;
  readonly input?: unknown;
}

/** A run no client finished: its key is free, its recovery point unfinished (see `IdempotencyCompleter`). */
export interface AbandonedRun extends RecoveryPoint {
  /** The store key. */
  readonly key: string;
}

/** One phase's result, as a store adds it to the recovery point of the caller's claim. */
export interface PhaseAdvance {
  readonly fingerprint: string;
  readonly phase: string;
  /** The result as JSON text. */
  readonly result: string;
  /** The run's `@PhasedWorkflow()` and its input as JSON text, kept from the first phase on. */
  readonly workflow?: string;
  readonly input?: string;
  /** The claim's lease, renewed by the same statement. */
  readonly leaseMs: number;
  /** How long the recovery point is kept from now: the route's ttl. */
  readonly ttlMs: number;
}
