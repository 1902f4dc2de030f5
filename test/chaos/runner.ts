import { sleep } from '../support/timing.js';
import { Cluster, type StoreKind } from './cluster.js';
import { type Fault, faultsFor } from './faults.js';
import { type Attempt, check, type FaultWindow, type HistoryLine, id, type Verdict } from './history.js';
import { drive, operations, random, WAIT_MS } from './workload.js';

/** How big one scenario (a fault on a store) is. */
export interface ScenarioOptions {
  seed: number;
  /** Operations (keys) per scenario. */
  operations: number;
  /** Over how long their first requests are spread (ms). */
  spreadMs: number;
  /** Extra time a key may take to be answered after the heal, beyond lease + slowest handler + retry pause (a busy machine). */
  slackMs: number;
  /** The chaos pod's slow handler (ms); 400 by default. */
  slowMs?: number;
  /** Each pod's PostgreSQL pool size; the store's default by default. */
  poolSize?: number;
}

export interface ScenarioResult extends Verdict {
  store: StoreKind;
  fault: string;
  seed: number;
  /** The fault's window, and for each key with a violation its log lines and requests, to read what happened. */
  evidence: { window: FaultWindow; keys: Record<string, { lines: HistoryLine[]; attempts: Attempt[] }> };
}

const LEASE_MS = 1000;
const SLOW_MS = 400;
const CHAOS_ROUTES = ['/fast', '/slow', '/slow', '/flaky', '/declined', '/stream', '/wait', '/wait'];
/** A waiter is answered within this long of the run it waited for (the commit, the wake-up, a look at the store). */
const WAIT_SLACK_MS = 1500;

/** 2xx, and the declined route's 402: answers that are stored and replayed. */
const final = (status: number): boolean => (status >= 200 && status < 300) || status === 402;

export function clusterFor(store: StoreKind, shape: { slowMs?: number; poolSize?: number } = {}): Promise<Cluster> {
  return Cluster.start({
    store,
    pods: store === 'memory' ? 1 : 2,
    leaseMs: LEASE_MS,
    slowMs: shape.slowMs ?? SLOW_MS,
    poolSize: shape.poolSize,
  });
}

/**
 * One fault on one cluster: the workload starts, the fault strikes at a random moment of it and
 * heals after its hold, clients go on until every key is answered or a deadline passes; once every
 * lease has ended, the store is inspected and the history checked.
 */
export async function runScenario(cluster: Cluster, fault: Fault, options: ScenarioOptions): Promise<ScenarioResult> {
  const { store, leaseMs, slowMs } = cluster.options;
  const rng = random(options.seed);
  const prefix = `${fault.name}-${options.seed.toString(36)}`;
  const ledger = store === 'postgres-tx';
  const ops = operations(options.operations, prefix, options.spreadMs, rng, ledger ? [''] : CHAOS_ROUTES, (i) =>
    ledger ? { amount: 100 + i, currency: 'EUR' } : { amount: 100 + i },
  );
  const injectAt = options.spreadMs * (0.2 + 0.4 * rng());
  const holdMs = fault.holdMs(leaseMs);
  const answerWithinMs = leaseMs + slowMs + 300 + options.slackMs;
  const started = Date.now();
  const deadline = started + injectAt + holdMs + answerWithinMs + 5000;
  const clients = drive(
    ops,
    cluster,
    {
      final,
      headers: (t) => cluster.headers(t),
      deadline,
      abandonShare: 0.15,
      requestTimeoutMs: 3 * leaseMs + slowMs + options.slackMs,
    },
    random(options.seed + 1),
  );

  await sleep(injectAt);
  const window: FaultWindow = { name: fault.name, startAt: Date.now(), healAt: 0, pods: [], cutsStore: fault.cutsStore };
  const injected = await fault.inject(cluster);
  window.pods = injected.pods;
  await sleep(holdMs);
  await injected.heal();
  window.healAt = Date.now();
  const attempts = await clients;
  await injected.recover?.();

  // Every lease of the scenario has ended (a killed pod's too): a claim still live has lost its owner.
  await sleep(leaseMs + 500);
  const ids = [...new Set(ops.map((op) => id(op.tenant, op.key)))];
  // The log holds every scenario this cluster ran: this one's runs and events are those of its keys
  // (an event no key could be found for, and a stall, by its time). Ends belong to runs, which are
  // filtered already.
  const mine = (line: HistoryLine) =>
    line.t === 'end' || (line.t === 'stall' || line.key === undefined ? line.at >= started : line.key.startsWith(`${prefix}-`));
  const lines = cluster.history().filter(mine);
  const rows = ledger
    ? new Map([...(await cluster.rows())].filter(([key]) => key.split('/')[1]?.startsWith(`${prefix}-`)))
    : undefined;
  const verdict = check(lines, attempts, fault.name === 'none' ? [] : [window], {
    answerWithinMs,
    final,
    rows,
    heldClaims: await cluster.heldClaims(ids),
    waits: { slackMs: WAIT_SLACK_MS, acrossPods: store === 'redis' || store === 'postgres', waitMs: WAIT_MS },
  });
  const keys: ScenarioResult['evidence']['keys'] = {};
  for (const v of verdict.violations) {
    const key = v.split(':')[0];
    const [tenant, name] = key.split('/');
    const runIds = new Set(
      lines.filter((l) => l.t === 'run' && l.tenant === tenant && l.key === name).map((l) => (l as { runId: string }).runId),
    );
    keys[key] = {
      lines: lines.filter((l) =>
        l.t === 'end' ? runIds.has(l.runId) : l.t === 'stall' || (l.tenant === tenant && l.key === name),
      ),
      attempts: attempts.filter((a) => a.tenant === tenant && a.key === name),
    };
  }
  return { store, fault: fault.name, seed: options.seed, ...verdict, evidence: { window, keys } };
}

/** Every fault of `faults` (all by default) once on each store, each store on a cluster of its own. */
export async function runAll(
  stores: readonly StoreKind[],
  options: ScenarioOptions & { faults?: readonly string[]; report?: (result: ScenarioResult) => void },
): Promise<ScenarioResult[]> {
  const results: ScenarioResult[] = [];
  let seed = options.seed;
  for (const store of stores) {
    const cluster = await clusterFor(store, options);
    try {
      for (const fault of faultsFor(store, options.faults)) {
        const result = await runScenario(cluster, fault, { ...options, seed: seed++ });
        results.push(result);
        options.report?.(result);
      }
    } finally {
      await cluster.stop();
    }
  }
  return results;
}

/** The table of results: one line per fault and store. */
export function table(results: readonly ScenarioResult[]): string {
  const head = [
    'store',
    'fault',
    'seed',
    'requests',
    'runs',
    'doubles',
    'stuck',
    'leases lost',
    'not stored',
    'pod stalls',
    'store stalls',
    'waiters',
    'max after heal (ms)',
    'violations',
  ];
  const rows = results.map((r) => [
    r.store,
    r.fault,
    String(r.seed),
    String(r.requests),
    String(r.runs),
    String(r.doubles),
    String(r.stuck),
    String(r.lostLeases),
    String(r.notStored),
    String(r.stalls),
    String(r.storeStalls),
    String(r.waiters),
    String(r.maxAfterHealMs),
    String(r.violations.length),
  ]);
  return markdownTable(head, rows);
}

/** A Markdown table whose columns line up: the head, its rule, the rows. */
export function markdownTable(head: readonly string[], rows: readonly string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: readonly string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}
