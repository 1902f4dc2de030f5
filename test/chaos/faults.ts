import type { FaultProxy } from '../support/fault-proxy.js';
import type { Cluster, StoreKind } from './cluster.js';

/** A fault in progress: the pods it stopped, killed or cut off, and how it ends. */
export interface Injected {
  /** Pods whose running handlers the fault froze, killed or cut off from the store (their overlaps are excused). */
  pods: string[];
  /** Ends the fault; resolves once it has ended (the server is back, the pod runs again). */
  heal(): Promise<void>;
  /** Makes the cluster whole again after the heal (starts a killed pod's successor). */
  recover?(): Promise<unknown>;
  /** A pod the fault added to the cluster, to send a request to. */
  joined?: { pod: string; base: string };
}

/** One kind of fault, for the stores it applies to. */
export interface Fault {
  name: string;
  stores: readonly StoreKind[];
  /** How long it lasts before its heal, for a lease of `leaseMs`. */
  holdMs(leaseMs: number): number;
  /** It takes the store out of reach (leases may lapse, commits fail); see FaultWindow.cutsStore. */
  cutsStore?: boolean;
  /** Readies the fault before the load starts (a pod that takes time to start). */
  prepare?(cluster: Cluster): Promise<void>;
  inject(cluster: Cluster): Promise<Injected>;
}

/** The pod `crash-in-phase` readies, per cluster: the ledger sample set to die right after a ride's charge phase. */
const crashing = new WeakMap<Cluster, NonNullable<Cluster['slots'][number]>>();

const NETWORK: readonly StoreKind[] = ['redis', 'postgres', 'postgres-tx', 'mysql', 'mysql-tx'];
const POD_FAULTS: readonly StoreKind[] = ['redis', 'postgres', 'sqlite', 'postgres-tx', 'mysql', 'mysql-tx'];

/** Kills or stops the first pod; a successor takes its slot as an orchestrator would start one. */
function replacing(cluster: Cluster, end: (pod: NonNullable<Cluster['slots'][number]>) => Promise<unknown>): Injected {
  const pod = cluster.slots[0]!;
  return {
    pods: [pod.name],
    heal: async () => {
      cluster.slots[0] = undefined;
      await end(pod);
    },
    recover: () => cluster.startPod(0),
  };
}

/** A fault on the wire of every pod: `start` on each proxy now, `end` on each at the heal. */
function everyProxy(cluster: Cluster, start: (proxy: FaultProxy) => void, end: (proxy: FaultProxy) => void): Injected {
  for (const proxy of cluster.proxies) start(proxy);
  return {
    pods: [],
    heal: async () => {
      for (const proxy of cluster.proxies) end(proxy);
    },
  };
}

/**
 * The catalogue. Each fault acts at a random moment of the load and heals after its hold; what it
 * does to requests and leases is what docs/chaos.md describes.
 */
export const FAULTS: readonly Fault[] = [
  {
    name: 'none',
    stores: ['memory', 'redis', 'postgres', 'sqlite', 'postgres-tx', 'mysql', 'mysql-tx'],
    holdMs: () => 0,
    inject: async () => ({ pods: [], heal: async () => undefined }),
  },
  {
    // Another zone: a few milliseconds each way, with jitter, on every connection to the store.
    name: 'latency',
    stores: NETWORK,
    holdMs: (lease) => 2 * lease,
    inject: async (cluster) =>
      everyProxy(
        cluster,
        (proxy) => proxy.delay({ delayMs: 4, jitterMs: 4 }),
        (proxy) => proxy.delay({ delayMs: 0, jitterMs: 0 }),
      ),
  },
  {
    // The store unreachable from every pod: connections cut, new ones refused, longer than a lease.
    name: 'partition',
    cutsStore: true,
    stores: NETWORK,
    holdMs: (lease) => 2 * lease,
    inject: async (cluster) =>
      everyProxy(
        cluster,
        (proxy) => proxy.partition(),
        (proxy) => proxy.heal(),
      ),
  },
  {
    // One pod cut off from the store while the others go on: its leases lapse and its keys move on.
    name: 'isolate-pod',
    cutsStore: true,
    stores: ['redis', 'postgres', 'mysql'],
    holdMs: (lease) => 2 * lease,
    inject: async (cluster) => {
      cluster.proxies[0].partition();
      return { pods: [cluster.slots[0]!.name], heal: async () => cluster.proxies[0].heal() };
    },
  },
  {
    // A hung path: bytes held in both directions, connections left open, for longer than a lease.
    name: 'stall',
    cutsStore: true,
    stores: ['redis', 'postgres', 'mysql'],
    holdMs: (lease) => Math.round(1.5 * lease),
    inject: async (cluster) =>
      everyProxy(
        cluster,
        (proxy) => proxy.stall(),
        (proxy) => proxy.resume(),
      ),
  },
  {
    // The store process killed and started again on its data (Redis with its append-only file).
    name: 'store-restart',
    cutsStore: true,
    stores: NETWORK,
    holdMs: () => 300,
    inject: async (cluster) => {
      const server = (cluster.redis ?? cluster.postgres ?? cluster.mysql)!;
      await server.stop();
      return { pods: [], heal: () => server.resume() };
    },
  },
  {
    // Redis answers nothing for a while (CLIENT PAUSE), connections open: a failover or a slow fork.
    name: 'client-pause',
    cutsStore: true,
    stores: ['redis'],
    holdMs: (lease) => Math.round(1.5 * lease),
    inject: async (cluster) => {
      const ms = Math.round(1.5 * cluster.options.leaseMs);
      cluster.redis!.cli('CLIENT', 'PAUSE', String(ms), 'ALL');
      return { pods: [], heal: async () => undefined };
    },
  },
  {
    // A pod crashes (SIGKILL) mid-handler; a successor starts in its slot.
    name: 'kill-pod',
    stores: POD_FAULTS,
    holdMs: () => 0,
    inject: async (cluster) => replacing(cluster, (pod) => pod.kill()),
  },
  {
    // A rolling deploy: SIGTERM, running handlers finish and commit, the pod exits; a successor starts.
    name: 'sigterm-pod',
    stores: POD_FAULTS,
    holdMs: () => 0,
    inject: async (cluster) => {
      const injected = replacing(cluster, (pod) => pod.terminate());
      // A graceful shutdown excuses nothing: its handlers must finish and commit.
      return { ...injected, pods: [] };
    },
  },
  {
    // A pod set to die (SIGKILL) right after a ride's charge phase gets one ride, from a client that
    // never comes back: the provider was called and the charge committed, the receipt not. Nobody
    // but a completer on the other pods finishes the ride.
    name: 'crash-in-phase',
    stores: ['postgres-tx'],
    holdMs: (lease) => 3 * lease,
    prepare: async (cluster) => {
      crashing.set(cluster, await cluster.standby({ FAULT: 'after:charge_created' }));
    },
    inject: async (cluster) => {
      const pod = crashing.get(cluster)!;
      return { pods: [pod.name], joined: { pod: pod.name, base: pod.base }, heal: () => pod.kill() };
    },
  },
  {
    // A frozen pod (a stop-the-world pause, a throttled container) for longer than a lease, then thawed.
    name: 'pause-pod',
    stores: ['memory', ...POD_FAULTS],
    holdMs: (lease) => 2 * lease,
    inject: async (cluster) => {
      const pod = cluster.slots[0]!;
      pod.signal('SIGSTOP');
      return { pods: [pod.name], heal: async () => pod.signal('SIGCONT') };
    },
  },
  {
    // Another process holds the SQLite file's write lock for longer than the busy timeout.
    name: 'sqlite-lock',
    cutsStore: true,
    stores: ['sqlite'],
    holdMs: () => 0,
    inject: async (cluster) => {
      const { released } = await cluster.lockSqlite(Math.round(1.5 * cluster.options.leaseMs));
      return { pods: [], heal: () => released.then(() => undefined) };
    },
  },
];

export function faultsFor(store: StoreKind, names?: readonly string[]): Fault[] {
  return FAULTS.filter((f) => f.stores.includes(store) && (!names || names.includes(f.name)));
}
