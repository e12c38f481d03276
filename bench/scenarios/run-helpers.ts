import type { BenchProducer, QueueAdapter } from '../adapters/queue-adapter.js';
import type { BenchDatabase } from '../bench-database.js';
import { msBetween, now, pollUntil, sleepUntil } from '../clock.js';
import { checkExactlyOnce, type ExactlyOnceResult } from '../exactly-once.js';
import type { WorkerProcess } from '../workers/worker-launcher.js';
import type { PickupTrace } from '../workers/sql-trace.js';
import { describePickupTraces } from './pickup-breakdown.js';
import type { ScenarioContext } from './scenario.js';

/** How often drains poll the database for "anything left?" (one indexed EXISTS query). */
export const DRAIN_POLL_MS = 20;

/** Resolves with the monotonic time at which no benchmark job was left unfinished. */
export function waitUntilDrained(adapter: QueueAdapter, db: BenchDatabase, timeoutMs: number, pollMs = DRAIN_POLL_MS): Promise<bigint> {
  return pollUntil(async () => !(await adapter.hasUnfinished(db)), pollMs, timeoutMs, `${adapter.name} to finish every job`);
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
  await waitUntilDrained(adapter, db, drainTimeoutMs(expected), 100);
  return stopAndVerify(adapter, db, context, workers, expected);
}

/** Generous: ten minutes plus 20 ms per job (50 jobs/s). */
export function drainTimeoutMs(jobs: number): number {
  return 600_000 + jobs * 20;
}

/**
 * Enqueues `count` jobs (seq 0 … count-1) one at a time at `ratePerSecond`, each with its own
 * call, and returns enqueue → handler-start latencies in ms (the handler's start time comes from
 * the worker process, on the same monotonic clock).
 */
export async function measurePacedLatency(
  producer: BenchProducer,
  worker: WorkerProcess,
  count: number,
  ratePerSecond: number,
  log?: (line: string) => void,
): Promise<number[]> {
  const startedAt = new Map<number, bigint>();
  const traces = new Map<number, PickupTrace>();
  worker.onStarted((seq, at, trace) => {
    if (!startedAt.has(seq)) startedAt.set(seq, at);
    if (trace && !traces.has(seq)) traces.set(seq, trace);
  });
  const sentAt: bigint[] = new Array(count);
  const intervalNs = BigInt(Math.round(1e9 / ratePerSecond));
  const t0 = now() + 50_000_000n;
  const calls: Promise<void>[] = [];
  for (let seq = 0; seq < count; seq++) {
    await sleepUntil(t0 + BigInt(seq) * intervalNs);
    sentAt[seq] = now();
    calls.push(producer.enqueue(seq));
  }
  await Promise.all(calls);
  await pollUntil(async () => startedAt.size >= count, 10, 60_000, `${count} jobs to start`);
  if (log && traces.size > 0) log(describePickupTraces(sentAt, startedAt, traces));
  return sentAt.map((sent, seq) => msBetween(sent, startedAt.get(seq)!));
}
