// What a fault-injection run records, and the checker that reads it. Pods append handler runs and
// idempotency events to a log (chaos-pod.ts); clients record every request they sent and what came
// back (workload.ts); the runner records when each fault began and healed and which pods it touched.

/** A line of the pods' log. */
export type HistoryLine =
  | { t: 'run'; runId: string; pod: string; route: string; tenant: string; key: string; at: number }
  | { t: 'end'; runId: string; outcome: 'returned' | 'threw'; at: number }
  | {
      t: 'event';
      pod: string;
      outcome: string;
      status?: number;
      code?: string;
      tenant?: string;
      key?: string;
      /** `tenant/key` of the request in whose async context the listener ran, if any. */
      context?: string;
      at: number;
    }
  /**
   * The pod's event loop stood still from `from` to `at` for a third of a lease or more: the machine
   * starved it (another job on the cores). For its leases that is a pause, as a SIGSTOP would be.
   */
  | {
      t: 'stall';
      pod: string;
      from: number;
      at: number;
      /**
       * Not one pod but the path to the store stood still: the process that carries every pod's store
       * traffic through its proxies (the runner's own), or the store server itself (its latency
       * monitor). Every pod's leases may lapse then, as under a store-cutting fault.
       */
      store?: true;
    };

/** One request as its client saw it. */
export interface Attempt {
  tenant: string;
  key: string;
  pod: string;
  sentAt: number;
  doneAt: number;
  /** 0 when no answer came (connection refused or reset, or the client's own timeout). */
  status: number;
  text: string;
  replayed: boolean;
  /** Sent by the client once it had the key's final answer, to check the replay. */
  check?: true;
}

/** A handler run, from its two log lines (`endAt` undefined when the pod died or stopped during it). */
export interface Run {
  runId: string;
  pod: string;
  /** The pod's route (`wait` is the one with `inFlight: 'wait'`). */
  route?: string;
  tenant: string;
  key: string;
  startAt: number;
  endAt: number | undefined;
  outcome: 'returned' | 'threw' | undefined;
}

/** A fault's time window, and the pods it stopped, killed or cut off (their runs may overlap a successor's). */
export interface FaultWindow {
  name: string;
  startAt: number;
  healAt: number;
  pods: string[];
  /**
   * The store was out of every pod's reach for a while (cut off, stalled, restarted, locked): a lease
   * may lapse and a commit fail then. Without such a fault, a lost lease or an unstored response is
   * itself a violation, since the library promises neither happens on a merely slow or busy path.
   */
  cutsStore?: boolean;
}

export interface CheckOptions {
  /** Longest a key may stay unanswerable after the fault healed (lease, slowest handler, retry gaps, slack). */
  answerWithinMs: number;
  /** Statuses that are a final answer: stored and replayed. */
  final: (status: number) => boolean;
  /** Business rows per tenant and key, where the route writes some (the transactional route). */
  rows?: Map<string, number>;
  /** Keys whose claim the store still held, live, after the run (peeked once every lease had ended). */
  heldClaims?: string[];
  /**
   * Calls to an outside service per key of a phased route (each under the key its run derived):
   * at most `max` — the run's own and those of whoever resumed it after a crash — and at least one
   * for a key that was answered.
   */
  foreign?: { calls: Map<string, number>; max: number };
  /** Keys whose business work the database shows unfinished (a ride not charged): none may have a 2xx answer. */
  unfinished?: string[];
  /** The `inFlight: 'wait'` route's promise: a duplicate is answered when the run it waits for settles. */
  waits?: {
    /** The run's settle (its commit and the wake-up) may take this long after the handler returned (ms). */
    slackMs: number;
    /** The store wakes the waiters of other pods (Redis, PostgreSQL); else they look again when `waitMs` ends. */
    acrossPods: boolean;
    waitMs: number;
  };
}

/** What the checker found: the table's row and every violation, in words. */
export interface Verdict {
  requests: number;
  runs: number;
  doubles: number;
  stuck: number;
  /** Longest time from heal to a key's final answer, among keys still unanswered at the heal (ms). */
  maxAfterHealMs: number;
  /** Claims whose lease was reported lost (once per pod and key), and responses not stored (a failed or fenced commit). */
  lostLeases: number;
  notStored: number;
  /** Stretches in which a pod's event loop stood still for a third of a lease or more (see the `stall` line). */
  stalls: number;
  /** Stretches in which the path to the store stood still as long (the proxies' process, the store server). */
  storeStalls: number;
  /** Requests of the `wait` route that came while a run of their key ran, checked by the waiters' rule. */
  waiters: number;
  violations: string[];
}

export const id = (tenant: string, key: string): string => `${tenant}/${key}`;

export function runsOf(lines: HistoryLine[]): Run[] {
  const runs = new Map<string, Run>();
  for (const line of lines) {
    if (line.t === 'run')
      runs.set(line.runId, { ...line, startAt: line.at, endAt: undefined, outcome: undefined, pod: line.pod });
    else if (line.t === 'end') {
      const run = runs.get(line.runId);
      if (run) Object.assign(run, { endAt: line.at, outcome: line.outcome });
    }
  }
  return [...runs.values()];
}

function groupBy<T>(items: T[], of: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = of(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

/**
 * Reads a run's history for the guarantees of the protocol:
 * - no handler ran for a key after a request of it was stored (`executed`); no two runs of a key
 *   overlapped and none followed one that returned, unless the earlier one's pod was stopped, killed
 *   or cut off by the fault before its response was stored, or it lost its lease or its commit while
 *   a fault cut the store off;
 * - no lease was lost and no response went unstored unless a fault cut the store off (from its start
 *   until `answerWithinMs` after its heal) or touched that pod: latency, load and a graceful shutdown
 *   excuse neither;
 * - every final answer to a key carried the same bytes, unless a run of it was not stored (its commit
 *   failed or was fenced: the next request legitimately runs it again), and a request sent after the
 *   answer got the replay (a final answer), unless a fault explains it;
 * - every answer belongs to the tenant that asked, and every event of a request reached the listener
 *   in that request's async context;
 * - every key got a final answer, within `answerWithinMs` of the heal for keys unanswered by then;
 * - the store holds no live claim after the run, and the route wrote one business row per answered key;
 * - a phased route called the outside service at least once and at most `foreign.max` times per key;
 * - a duplicate that waited for a run (`inFlight: 'wait'`: sent before the run ended, answered after it
 *   began, not its fresh answer) was answered within `waits.slackMs` of the
 *   run's end (of its `waitMs` on another pod, where the store wakes no other pod), unless a fault or a
 *   stall touched either pod or the store, or the run's response was not stored.
 */
export function check(lines: HistoryLine[], attempts: Attempt[], faults: FaultWindow[], options: CheckOptions): Verdict {
  const violations: string[] = [];
  const runs = runsOf(lines);
  const events = lines.filter((l): l is Extract<HistoryLine, { t: 'event' }> => l.t === 'event');
  const stored = groupBy(
    events.filter((e) => e.outcome === 'executed' && e.key),
    (e) => id(e.tenant!, e.key!),
  );
  const unstored = new Set(events.filter((e) => e.outcome === 'not-stored' && e.key).map((e) => id(e.tenant!, e.key!)));
  const lapses = events.filter((e) => e.outcome === 'lease-lost' || e.outcome === 'not-stored');
  const stalls = lines.filter((l): l is Extract<HistoryLine, { t: 'stall' }> => l.t === 'stall');
  const underFault = (e: { pod: string; at: number }): boolean =>
    faults.some(
      (f) => f.pods.includes(e.pod) || (f.cutsStore === true && f.startAt <= e.at && e.at <= f.healAt + options.answerWithinMs),
    ) || stalls.some((s) => (s.store || s.pod === e.pod) && s.from <= e.at && e.at <= s.at + options.answerWithinMs);
  for (const e of events)
    if (e.context !== undefined && e.outcome !== 'lease-lost' && e.key && e.context !== id(e.tenant!, e.key))
      violations.push(`${id(e.tenant!, e.key)}: its ${e.outcome} event reached the listener in ${e.context}'s context`);
  const reported = new Set<string>();
  for (const e of lapses) {
    const what = `${id(e.tenant ?? '?', e.key ?? '?')}: ${e.outcome} on ${e.pod} with no fault cutting the store off`;
    if (!underFault(e) && !reported.has(what)) violations.push(what);
    reported.add(what);
  }
  // A run may be followed by another of its key when its pod was under the fault, or when it lost
  // its lease or its commit while a fault cut the store off: the key was free again, legitimately.
  // A handler that returned shortly before its pod was killed or frozen may not have had its commit
  // land (one round trip, longer on a starved path): its pod stored nothing for the key before the
  // fault, so the fault explains the loss. Had it stored, a later run is flagged as run after storing.
  const storedBy = (run: Run, before: number): boolean =>
    (stored.get(id(run.tenant, run.key)) ?? []).some((e) => e.pod === run.pod && e.at < before);
  const excused = (run: Run): boolean =>
    faults.some(
      (f) =>
        f.pods.includes(run.pod) &&
        run.startAt <= f.healAt &&
        (f.startAt <= (run.endAt ?? Infinity) || (run.endAt! >= f.startAt - options.answerWithinMs && !storedBy(run, f.startAt))),
    ) ||
    lapses.some((e) => e.pod === run.pod && e.key === run.key && e.tenant === run.tenant && e.at >= run.startAt && underFault(e));

  let doubles = 0;
  for (const [key, group] of groupBy(runs, (r) => id(r.tenant, r.key))) {
    group.sort((a, b) => a.startAt - b.startAt);
    const firstStored = Math.min(...(stored.get(key) ?? []).map((e) => e.at));
    for (let j = 1; j < group.length; j++) {
      const later = group[j];
      if (later.startAt > firstStored) {
        doubles++;
        violations.push(`${key}: run ${later.runId} started after the key's response was stored`);
        continue;
      }
      const earlier = group
        .slice(0, j)
        .find((e) => ((e.endAt ?? Infinity) > later.startAt || e.outcome === 'returned') && !excused(e));
      if (earlier) {
        doubles++;
        violations.push(
          (earlier.endAt ?? Infinity) > later.startAt
            ? `${key}: run ${later.runId} started while ${earlier.runId} was still running`
            : `${key}: run ${later.runId} started after ${earlier.runId} had returned`,
        );
      }
    }
  }

  const byKey = groupBy(attempts, (a) => id(a.tenant, a.key));
  const healAt = Math.max(0, ...faults.map((f) => f.healAt));
  let stuck = 0;
  let maxAfterHealMs = 0;
  for (const [key, tries] of byKey) {
    for (const a of tries) {
      if (a.status === 0 || !a.text.startsWith('{')) continue;
      const body = JSON.parse(a.text) as { tenant?: string; key?: string };
      if (body.tenant !== undefined && (body.tenant !== a.tenant || body.key !== a.key))
        violations.push(`${key}: answered with ${body.tenant}/${body.key}'s response`);
    }
    const finals = tries.filter((a) => options.final(a.status));
    if (finals.length === 0) {
      stuck++;
      violations.push(`${key}: no final answer (last: ${tries.at(-1)?.status ?? 'none'})`);
      continue;
    }
    // A request sent once the key's answer was back is answered its replay: a refusal, an error or a
    // 409 then is a replay that failed (item 8 of issue 44: a GraphQL replay of a DateTime answered
    // null and an error for the whole TTL), unless a fault explains it or the answer was never stored.
    const answered = Math.min(...finals.map((a) => a.doneAt));
    for (const a of tries)
      if (
        (a.check || a.sentAt > answered) &&
        a.status !== 0 &&
        !options.final(a.status) &&
        !unstored.has(key) &&
        !underFault({ pod: a.pod, at: a.doneAt })
      )
        violations.push(`${key}: a request after its answer got ${a.status} instead of the replay`);
    const texts = new Set(finals.map((a) => `${a.status} ${a.text}`));
    if (texts.size > 1 && !unstored.has(key))
      violations.push(`${key}: ${texts.size} different final answers: ${[...texts].join(' | ')}`);
    const answeredAt = Math.min(...finals.map((a) => a.doneAt));
    const started = Math.min(...tries.map((a) => a.sentAt));
    if (healAt > 0 && started < healAt && answeredAt > healAt) {
      maxAfterHealMs = Math.max(maxAfterHealMs, answeredAt - healAt);
      if (answeredAt - healAt > options.answerWithinMs) {
        stuck++;
        violations.push(`${key}: answered ${answeredAt - healAt} ms after the heal`);
      }
    }
    const rows = options.rows?.get(key) ?? (options.rows ? 0 : undefined);
    if (rows !== undefined && rows !== 1) {
      doubles += Math.max(0, rows - 1);
      violations.push(`${key}: ${rows} business rows for one answered key`);
    }
  }
  for (const key of options.heldClaims ?? []) violations.push(`${key}: the store still holds a live claim after the run`);
  for (const key of options.unfinished ?? [])
    if (byKey.get(key)?.some((a) => a.status >= 200 && a.status < 300))
      violations.push(`${key}: answered as done, but its work was left half done`);
  for (const [key, calls] of options.foreign?.calls ?? []) {
    if (calls > options.foreign!.max) violations.push(`${key}: ${calls} calls to the provider for one derived key`);
    if (calls === 0 && byKey.get(key)?.some((a) => options.final(a.status)))
      violations.push(`${key}: answered without a call to the provider under the key its run derives`);
  }
  const waited = options.waits
    ? lateWaiters(runs, byKey, options.waits, (key) => unstored.has(key), underFault, options.final)
    : undefined;
  violations.push(...(waited?.late ?? []));
  return {
    requests: attempts.length,
    runs: options.rows ? [...options.rows.values()].reduce((a, b) => a + b, 0) : runs.length,
    doubles,
    stuck,
    maxAfterHealMs,
    lostLeases: new Set(lapses.filter((e) => e.outcome === 'lease-lost').map((e) => `${e.pod} ${e.tenant} ${e.key}`)).size,
    notStored: lapses.length - lapses.filter((e) => e.outcome === 'lease-lost').length,
    stalls: stalls.filter((s) => !s.store).length,
    storeStalls: stalls.filter((s) => s.store).length,
    waiters: waited?.checked ?? 0,
    violations,
  };
}

/** The waiters of `wait` runs answered later than the run's settle allows (see {@link check}). */
function lateWaiters(
  runs: Run[],
  byKey: Map<string, Attempt[]>,
  waits: NonNullable<CheckOptions['waits']>,
  unstored: (key: string) => boolean,
  underFault: (e: { pod: string; at: number }) => boolean,
  final: (status: number) => boolean,
): { checked: number; late: string[] } {
  const late: string[] = [];
  let checked = 0;
  for (const run of runs) {
    const key = id(run.tenant, run.key);
    if (run.route !== 'wait' || run.outcome !== 'returned' || unstored(key) || underFault({ pod: run.pod, at: run.endAt! }))
      continue;
    for (const a of byKey.get(key) ?? []) {
      // A waiter: answered after the run began, sent before it ended, and not the run's own fresh answer.
      const own = final(a.status) && !a.replayed;
      if (a.status === 0 || own || a.doneAt < run.startAt || a.sentAt > run.endAt! || underFault({ pod: a.pod, at: a.doneAt }))
        continue;
      checked++;
      const woken = a.pod === run.pod || waits.acrossPods ? run.endAt! : Math.max(run.endAt!, a.sentAt + waits.waitMs);
      if (a.doneAt > woken + waits.slackMs)
        late.push(
          `${key}: a duplicate on ${a.pod} waiting for ${run.runId} was answered ${a.doneAt - run.endAt!} ms after it returned (${a.status})`,
        );
    }
  }
  return { checked, late };
}
