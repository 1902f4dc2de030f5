import type { Attempt } from './history.js';

/** A small seeded generator (mulberry32): the same seed gives the same workload and fault times. */
export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** How long a duplicate of the pods' `wait` route (`inFlight: 'wait'`) waits, in ms: the checker knows it. */
export const WAIT_MS = 5000;

/** One logical operation: a key of a tenant on a route, sent until it gets a final answer. */
export interface Operation {
  tenant: string;
  key: string;
  /** Path after the pod's base URL. */
  path: string;
  body: unknown;
  /** When its first request goes out, from the workload's start (ms). */
  startMs: number;
  /** Its first request is sent twice at once (a double click). */
  doubled: boolean;
  /** The client sends one request, leaves before the answer and never comes back (what the completer is for). */
  once?: boolean;
}

/** Where requests go: the pods that are up right now (a killed pod leaves, its successor joins). */
export interface Targets {
  bases(): { pod: string; base: string }[];
}

export interface WorkloadOptions {
  /** Statuses that end an operation (stored, replayed). */
  final: (status: number) => boolean;
  /** Headers of every request of a tenant (its token or tenant header). */
  headers: (tenant: string) => Record<string, string>;
  /** No request is sent after this (epoch ms): what has no final answer by then is stuck. */
  deadline: number;
  /** Share of requests the client gives up on early (a timeout, a user who leaves). */
  abandonShare: number;
  /** A request the client does not give up on is still abandoned after this long (ms). */
  requestTimeoutMs: number;
  /**
   * A NATS request's time-out when the client does not give up early (ms): a request its consumer
   * died with is never answered, so this, not a refused connection, is when its client retries.
   */
  natsTimeoutMs?: number;
  /** Sends an operation whose path is `nats:<subject>` as a NATS request; no answer in `timeoutMs` is status 0. */
  nats?: (op: Operation, timeoutMs: number) => Promise<{ status: number; text: string }>;
}

/** A GraphQL answer as the checker reads it: the mutation's data with 200, or the first error's status (500 if none). */
export function graphqlAnswer(status: number, text: string): { status: number; text: string } {
  if (status !== 200 || !text.startsWith('{')) return { status, text };
  const body = JSON.parse(text) as { data?: Record<string, unknown> | null; errors?: { extensions?: { status?: number } }[] };
  const field = body.data && Object.values(body.data)[0];
  if (field) return { status: 200, text: JSON.stringify(field) };
  return { status: body.errors?.[0]?.extensions?.status ?? 500, text };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Sends one request and records what came back; no answer (refused, reset, timed out) is status 0. */
async function send(
  target: { pod: string; base: string },
  op: Operation,
  options: WorkloadOptions,
  timeoutMs: number,
  attempts: Attempt[],
): Promise<Attempt> {
  const sentAt = Date.now();
  const attempt: Attempt = {
    tenant: op.tenant,
    key: op.key,
    pod: target.pod,
    sentAt,
    doneAt: 0,
    status: 0,
    text: '',
    replayed: false,
  };
  try {
    if (op.path.startsWith('nats:')) {
      // A queue group picks the pod: the client knows none.
      attempt.pod = 'nats';
      Object.assign(attempt, await options.nats!(op, Math.min(timeoutMs, options.natsTimeoutMs ?? timeoutMs)));
    } else {
      const res = await fetch(`${target.base}${op.path}`, {
        method: 'POST',
        headers: { ...options.headers(op.tenant), 'idempotency-key': op.key, 'content-type': 'application/json' },
        body: JSON.stringify(op.body),
        signal: AbortSignal.timeout(timeoutMs),
      });
      const text = await res.text();
      Object.assign(attempt, op.path.endsWith('/graphql') ? graphqlAnswer(res.status, text) : { status: res.status, text });
      attempt.replayed = res.headers.get('idempotent-replayed') === 'true';
    }
  } catch (error) {
    attempt.text = (error as Error).name;
  }
  attempt.doneAt = Date.now();
  attempts.push(attempt);
  return attempt;
}

/**
 * Drives every operation as a client would: its first request (sometimes twice at once) to a random
 * pod, then retries after random pauses to random pods until a final answer; some requests are
 * abandoned early. After a final answer, one more request in two checks the replay. Resolves with
 * every attempt once each operation is answered or the deadline passed.
 */
export async function drive(ops: Operation[], targets: Targets, options: WorkloadOptions, rng: () => number): Promise<Attempt[]> {
  const attempts: Attempt[] = [];
  const started = Date.now();
  const pick = () => {
    const up = targets.bases();
    return up[Math.floor(rng() * up.length)];
  };
  const timeout = () => (rng() < options.abandonShare ? 50 + rng() * 400 : options.requestTimeoutMs);
  const one = async (op: Operation) => {
    await sleep(Math.max(0, started + op.startMs - Date.now()));
    if (op.once) {
      const target = pick();
      if (target) await send(target, op, options, 50 + rng() * 400, attempts);
      return;
    }
    const first = op.doubled ? [send(pick(), op, options, timeout(), attempts)] : [];
    let answer = (await Promise.all([send(pick(), op, options, timeout(), attempts), ...first])).find((a) =>
      options.final(a.status),
    );
    while (!answer && Date.now() < options.deadline) {
      await sleep(30 + rng() * 250);
      const target = pick();
      if (!target) continue;
      const a = await send(target, op, options, options.requestTimeoutMs, attempts);
      if (options.final(a.status)) answer = a;
    }
    if (answer && rng() < 0.5) {
      const target = pick();
      if (target) (await send(target, op, options, options.requestTimeoutMs, attempts)).check = true;
    }
  };
  await Promise.all(ops.map(one));
  return attempts;
}

/**
 * `count` operations on random `paths`, spread over `spreadMs`: a quarter of the keys are used by
 * both tenants (each must get its own answer).
 */
export function operations(
  count: number,
  prefix: string,
  spreadMs: number,
  rng: () => number,
  paths: readonly string[],
  body: (i: number, path: string, key: string) => unknown,
): Operation[] {
  const ops: Operation[] = [];
  for (let i = 0; i < count; i++) {
    const path = paths[Math.floor(rng() * paths.length)];
    const startMs = rng() * spreadMs;
    const doubled = rng() < 0.3;
    const key = `${prefix}-${i}`;
    ops.push({ tenant: 'alice', key, path, body: body(i, path, key), startMs, doubled });
    if (rng() < 0.25) ops.push({ tenant: 'bob', key, path, body: body(i, path, key), startMs: startMs + rng() * 50, doubled });
  }
  return ops;
}
