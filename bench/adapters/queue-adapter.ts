import type { BenchDatabase } from '../bench-database.js';

/**
 * The systems the benchmark can drive: four; auto-job-queue with claims that skip the flush; and
 * auto-job-queue and the reference deleting each job as it completes.
 */
export type AdapterName =
  | 'auto-job-queue'
  | 'ajq-async-claims'
  | 'ajq-delete'
  | 'reference'
  | 'reference-delete'
  | 'graphile-worker'
  | 'pg-boss';

/** Settings printed with the results, so a reader can reproduce each system's configuration. */
export type AdapterSettings = Record<string, string | number | boolean>;

/** The job type (queue name) every benchmark job uses. */
export const BENCH_JOB_TYPE = 'bench.noop';

/** Every benchmark job carries its sequence number, so runs can be counted per job. */
export interface BenchPayload {
  seq: number;
  /** When the enqueue call began, µs on the monotonic clock (the soak's pickup latency), if stamped. */
  t?: number;
}

/** A benchmark job's payload: its seq, and the enqueue time when one is given. */
export function benchPayload(seq: number, stampedAt?: number): BenchPayload {
  return stampedAt === undefined ? { seq } : { seq, t: stampedAt };
}

/** Enqueues benchmark jobs from the harness process through the system's own client API. */
export interface BenchProducer {
  /** One call, one batch, through the system's bulk API; `stampedAt` goes into each payload as `t`. */
  enqueueMany(seqs: readonly number[], stampedAt?: number): Promise<void>;
  /** One job through the system's single-job API. */
  enqueue(seq: number): Promise<void>;
  close(): Promise<void>;
}

/** A running worker inside a worker process. */
export interface BenchWorker {
  /** Graceful stop: in-flight jobs finish, nothing new is claimed. */
  stop(): Promise<void>;
}

/**
 * What the benchmark needs from a queue system. The harness side (install, producer, counts,
 * retained rows) runs in the benchmark process; `startWorker` runs inside a worker process.
 */
export interface QueueAdapter {
  readonly name: AdapterName;
  /** The system its drain ratios are paired with, round by round: `reference` unless set. */
  readonly comparedWith?: AdapterName;
  /** Completed jobs leave no row behind. */
  readonly deletesOnComplete?: boolean;
  /** The worker-side configuration used at this concurrency, as printed in the report. */
  settings(concurrency: number): AdapterSettings;
  /** Creates the system's tables in a fresh database (not timed). */
  install(url: string): Promise<void>;
  openProducer(url: string): Promise<BenchProducer>;
  /** Whether any benchmark job is still waiting or running; cheap enough to poll. */
  hasUnfinished(db: BenchDatabase): Promise<boolean>;
  /**
   * After a run: null when the database shows exactly `expected` benchmark jobs finished
   * successfully and nothing else left over, else what is wrong.
   */
  checkFinished(db: BenchDatabase, expected: number, retained: number): Promise<string | null>;
  /** Adds `count` already-finished rows in one INSERT … SELECT generate_series, then VACUUM ANALYZE. */
  retainFinished(db: BenchDatabase, count: number): Promise<void>;
  /** Table(s) that hold the retained rows, for the report. */
  readonly retainedRowsNote: string;
  /** Runs in a worker process: starts claiming `BENCH_JOB_TYPE` and calls `onJob` as each job starts. */
  startWorker(url: string, concurrency: number, onJob: (payload: BenchPayload) => void): Promise<BenchWorker>;
}
