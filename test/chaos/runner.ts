import { sleep } from '../support/timing.js';
import { Cluster, isLedger, type StoreKind } from './cluster.js';
import { type Fault, faultsFor } from './faults.js';
import { type Attempt, check, type FaultWindow, type HistoryLine, id, type Verdict } from './history.js';
import { drive, type Operation, operations, random, WAIT_MS, type WorkloadOptions } from './workload.js';

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
  /** Runs the pods' completers drove through their last phase during the scenario. */
  completed: number;
  /** Keys sent per route (`/graphql`, `/inbox`, `nats:chaos.nats`, `/rides`, …): which surfaces the scenario had. */
  routes: Record<string, number>;
  fault: string;
  seed: number;
  /** The fault's window, and for each key with a violation its log lines and requests, to read what happened. */
  evidence: { window: FaultWindow; keys: Record<string, { lines: HistoryLine[]; attempts: Attempt[] }> };
}

const LEASE_MS = 1000;
const SLOW_MS = 400;
const HTTP_ROUTES = ['/fast', '/slow', '/slow', '/flaky', '/declined', '/stream', '/wait', '/wait'];
/** The other surfaces of the chaos pod: a GraphQL mutation, work through IdempotencyInbox, a NATS request handler. */
const OTHER_SURFACES = ['/graphql', '/graphql', '/inbox', '/inbox'];
const NATS = 'nats:chaos.nats';
/** The mutation the workload sends to the pods' GraphQL endpoint (its `at` is a Date behind the DateTime scalar). */
const CHARGE = 'mutation Charge($amount: Int!) { charge(amount: $amount) { tenant key route runId at } }';
/** The ledger sample's transactional charges and its rides in atomic phases (a provider call between two phases). */
const LEDGER_ROUTES = ['/charges', '/rides'];
/** The ledger on MySQL: its charges only (recovery points need PostgreSQL). */
const MYSQL_LEDGER_ROUTES = ['/charges'];
/** How long a run left by its client gets for a completer to finish it: idle 2 leases, then a look every half lease, and its phases. */
const COMPLETER_WAIT_MS = 6000;
/** A ride's provider call per derived key: the run's, and one more by whoever resumes it after a crash or a lapse. */
const MAX_PROVIDER_CALLS = 2;
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
  const ledger = isLedger(store);
  const routes =
    store === 'mysql-tx'
      ? MYSQL_LEDGER_ROUTES
      : ledger
        ? LEDGER_ROUTES
        : [...HTTP_ROUTES, ...OTHER_SURFACES, ...(cluster.nats ? [NATS, NATS] : [])];
  const ops = operations(options.operations, prefix, options.spreadMs, rng, routes, (i, path, key) =>
    path === '/rides'
      ? // One ride in ten is declined by the provider (a 402 that ends the run and is stored).
        { origin: key, destination: 'airport', amount: i % 10 === 3 ? 402 : 1000 + i, currency: 'EUR' }
      : path === '/graphql'
        ? { query: CHARGE, variables: { amount: 100 + i } }
        : ledger
          ? { amount: 100 + i, currency: 'EUR' }
          : { amount: 100 + i },
  );
  // Two rides in five (none declined) are sent once by a client that leaves mid-run: a run that
  // stops then (its pod killed, frozen, cut off) is the completer's to finish.
  for (const op of ops) if (op.path === '/rides' && (op.body as { amount: number }).amount !== 402) op.once = rng() < 0.4;
  const once = new Set(ops.filter((op) => op.once).map((op) => id(op.tenant, op.key)));
  const injectAt = options.spreadMs * (0.2 + 0.4 * rng());
  const holdMs = fault.holdMs(leaseMs);
  const answerWithinMs = leaseMs + slowMs + 300 + options.slackMs;
  await fault.prepare?.(cluster);
  const completionsBefore = cluster.completions();
  const started = Date.now();
  const deadline = started + injectAt + holdMs + answerWithinMs + 5000;
  const workload: WorkloadOptions = {
    final,
    headers: (t) => cluster.headers(t),
    deadline,
    abandonShare: 0.15,
    requestTimeoutMs: 3 * leaseMs + slowMs + options.slackMs,
    natsTimeoutMs: 2 * leaseMs,
    nats: (op, timeoutMs) => cluster.natsRequest(op.path.slice('nats:'.length), { tenant: op.tenant, key: op.key }, timeoutMs),
  };
  const clients = drive(ops, cluster, workload, random(options.seed + 1));

  await sleep(injectAt);
  const window: FaultWindow = { name: fault.name, startAt: Date.now(), healAt: 0, pods: [], cutsStore: fault.cutsStore };
  const injected = await fault.inject(cluster);
  window.pods = injected.pods;
  // A pod that crashes mid-run gets a ride from a client that never comes back: nobody but a
  // completer finishes it.
  const abandoned = injected.joined && abandonedRide(prefix);
  if (abandoned) {
    once.add(id(abandoned.tenant, abandoned.key));
    ops.push(abandoned);
  }
  const leaving =
    abandoned &&
    fetch(`${injected.joined!.base}${abandoned.path}`, {
      method: 'POST',
      headers: { ...cluster.headers(abandoned.tenant), 'idempotency-key': abandoned.key, 'content-type': 'application/json' },
      body: JSON.stringify(abandoned.body),
    }).catch(() => undefined);
  await sleep(holdMs);
  await injected.heal();
  window.healAt = Date.now();
  await leaving;
  const attempts = (await clients).filter((a) => !once.has(id(a.tenant, a.key)));
  await injected.recover?.();
  const mineOnce = async () => (ledger ? (await cluster.unfinishedRides()).filter((key) => once.has(key)) : []);
  const leftByClients = await mineOnce();

  // Every lease of the scenario has ended (a killed pod's too): a claim still live has lost its owner.
  // A run nobody came back for has been idle long enough for a completer to take it and finish it.
  await sleep(leaseMs + 500 + (ledger && leftByClients.length ? COMPLETER_WAIT_MS : 0));
  const halfDone = await mineOnce();
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
    foreign: ledger
      ? {
          calls: cluster.providerCalls([...new Set(ops.filter((op) => op.path === '/rides').map((op) => id(op.tenant, op.key)))]),
          max: MAX_PROVIDER_CALLS,
        }
      : undefined,
    unfinished: ledger
      ? (await cluster.unfinishedRides()).filter((key) => key.split('/')[1]?.startsWith(`${prefix}-`))
      : undefined,
    waits: { slackMs: WAIT_SLACK_MS, acrossPods: store === 'redis' || store === 'postgres', waitMs: WAIT_MS },
  });
  for (const key of halfDone)
    verdict.violations.push(`${key}: sent once and left; its ride is still half done (no completer finished it)`);
  for (const key of once) if ((rows?.get(key) ?? 0) > 1) verdict.violations.push(`${key}: ${rows!.get(key)} rides for one key`);
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
  const completed = cluster.completions() - completionsBefore;
  const sent: Record<string, number> = {};
  for (const op of ops) sent[op.path] = (sent[op.path] ?? 0) + 1;
  return { store, fault: fault.name, seed: options.seed, ...verdict, completed, routes: sent, evidence: { window, keys } };
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

/** A ride sent once by a client that leaves before its answer. */
function abandonedRide(prefix: string): Operation {
  const key = `${prefix}-abandoned`;
  const body = { origin: key, destination: 'airport', amount: 999, currency: 'EUR' };
  return { tenant: 'alice', key, path: '/rides', body, startMs: 0, doubled: false, once: true };
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
    'completer',
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
    String(r.completed),
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
