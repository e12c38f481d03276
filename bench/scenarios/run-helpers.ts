import type { BenchProducer, QueueAdapter } from '../adapters/queue-adapter.js';
import type { BenchDatabase } from '../bench-database.js';
import { msBetween, now, pollUntil, sleepUntil } from '../clock.js';
import { checkExactlyOnce, type ExactlyOnceResult } from '../exactly-once.js';
import type { WorkerProcess } from '../workers/worker-launcher.js';
import type { PickupTrace } from '../workers/sql-trace.js';
import { describePickupTraces } from './pickup-breakdown.js';
import type { ScenarioContext } from './scenario.js';

/**
 * How often the database is asked "anything left?" by default. That probe is an EXISTS query, but
 * on every system here it plans as a sequential scan (no index holds just the unfinished jobs), so
 * it costs more the more finished rows the table holds: a few ms at the end of a 20,000-job drain.
 */
export const DRAIN_POLL_MS = 20;
/** How often a timed drain asks its worker processes how many jobs they have run (IPC only). */
const RUNS_POLL_MS = 5;

/** Resolves with the monotonic time at which no benchmark job was left unfinished. */
export function waitUntilDrained(adapter: QueueAdapter, db: BenchDatabase, timeoutMs: number, pollMs = DRAIN_POLL_MS): Promise<bigint> {
  return pollUntil(async () => !(await adapter.hasUnfinished(db)), pollMs, timeoutMs, `${adapter.name} to finish every job`);
}

/**
 * Resolves once the worker processes have run `count` jobs between them (a job run twice counts
 * twice; the exactly-once check catches that later). They are asked over IPC, not the database,
 * so a timed drain can leave the database to the system measured until the last handler has run,
 * and only then probe it (waitUntilDrained) for the last completions.
 */
export async function waitUntilRun(workers: readonly WorkerProcess[], count: number, timeoutMs: number): Promise<void> {
  await pollUntil(
    async () => (await Promise.all(workers.map((worker) => worker.runs()))).reduce((sum, runs) => sum + runs, 0) >= count,
    RUNS_POLL_MS,
    timeoutMs,
    `${count} jobs to run`,
  );
}

/**
 * Stops the worker processes gracefully and checks their final run counts (every job of seq
 * 0 … expected-1 ran exactly once) and the database's view (`databaseExpected` benchmark jobs
 * finished plus the `retained` rows, nothing else).
 */
export async function stopAndVerify(
  adapter: QueueAdapter,
  db: BenchDatabase,
  context: ScenarioContext,
  workers: readonly WorkerProcess[],
  expected: number,
  databaseExpected = expected,
  retained = 0,
): Promise<ExactlyOnceResult> {
  const counts = await context.scope.stopWorkers(workers);
  return checkExactlyOnce(expected, counts, await adapter.checkFinished(db, databaseExpected, retained));
}

/** Enqueues seq 0 … count-1 in chunks through the bulk API. */
export async function enqueueInChunks(producer: BenchProducer, from: number, count: number, chunk: number): Promise<void> {
  for (let start = from; start < from + count; start += chunk) {
    const size = Math.min(chunk, from + count - start);
    await producer.enqueueMany(Array.from({ length: size }, (_, i) => start + i));
  }
}

/**
 * Runs all jobs already enqueued (seq 0 … expected-1) in one fresh worker process, untimed, and
 * checks that each ran exactly once: the check for scenarios that only time enqueueing.
 */
export async function drainAndVerify(
  adapter: QueueAdapter,
  db: BenchDatabase,
  context: ScenarioContext,
  expected: number,
): Promise<ExactlyOnceResult> {
  const workers = await context.scope.workers(1, {
    adapter: adapter.name,
    url: db.url,
    concurrency: context.sizes.verifyConcurrency,
    expectedJobs: expected,
    reportStarts: false,
  });
  try {
    await waitUntilDrained(adapter, db, drainTimeoutMs(expected), 100);
  } catch (error) {
    context.scope.killWorkers(workers);
    throw error;
  }
  return stopAndVerify(adapter, db, context, workers, expected);
}

/** Generous: ten minutes plus 20 ms per job (50 jobs/s). */
export function drainTimeoutMs(jobs: number): number {
  return 600_000 + jobs * 20;
}

/**
 * Enqueues `count` jobs (seq from … from+count-1) one at a time at `ratePerSecond`, each with its
 * own call, and returns enqueue → handler-start latencies in ms (the handler's start time comes
 * from the worker process, on the same monotonic clock).
 */
export async function measurePacedLatency(
  producer: BenchProducer,
  worker: WorkerProcess,
  count: number,
  ratePerSecond: number,
  log?: (line: string) => void,
  from = 0,
): Promise<number[]> {
  // Keyed by position in this call (seq - from).
  const startedAt = new Map<number, bigint>();
  const traces = new Map<number, PickupTrace>();
  const unsubscribe = worker.onStarted((seq, at, trace) => {
    const i = seq - from;
    if (i < 0 || i >= count) return;
    if (!startedAt.has(i)) startedAt.set(i, at);
    if (trace && !traces.has(i)) traces.set(i, trace);
  });
  try {
    const sentAt: bigint[] = new Array(count);
    const intervalNs = BigInt(Math.round(1e9 / ratePerSecond));
    const t0 = now() + 50_000_000n;
    const calls: Promise<void>[] = [];
    for (let i = 0; i < count; i++) {
      await sleepUntil(t0 + BigInt(i) * intervalNs);
      sentAt[i] = now();
      calls.push(producer.enqueue(from + i));
    }
    await Promise.all(calls);
    await pollUntil(async () => startedAt.size >= count, 10, 60_000, `${count} jobs to start`);
    if (log && traces.size > 0) log(describePickupTraces(sentAt, startedAt, traces));
    return sentAt.map((sent, i) => msBetween(sent, startedAt.get(i)!));
  } finally {
    unsubscribe();
  }
}
