import type { AdapterName } from '../adapters/queue-adapter.js';
import type { PickupTrace } from './sql-trace.js';

/** How the harness configures a worker process (JSON in the BENCH_WORKER environment variable). */
export interface WorkerProcessConfig {
  adapter: AdapterName;
  url: string;
  concurrency: number;
  /** Jobs carry seq 0 … expectedJobs-1; each run is counted per seq. */
  expectedJobs: number;
  /** Send a `started` message as each job starts (latency scenarios). */
  reportStarts: boolean;
  /** Count each job's pickup (enqueue call → start, from its payload's `t`) in a histogram (the soak). */
  pickupHistogram?: boolean;
  /** auto-job-queue only: `retention.completedMs` of the worker (the soak sets its own). */
  retentionMs?: number;
}

export interface MemoryReading {
  /** Bytes, read right after a full garbage collection. */
  rss: number;
  heapUsed: number;
  /** V8's heap as committed (used or not), and its young generation's share of it. */
  heapTotal: number;
  youngGeneration: number;
  /** Memory outside the V8 heap held by JS objects (Buffers among it). */
  external: number;
  /** Of the RSS, pages mapped from files (the node binary's code, shared) and anonymous ones; null off Linux. */
  rssFile: number | null;
  rssAnon: number | null;
}

/** Harness → worker process. */
export type ToWorker = { kind: 'memory' } | { kind: 'runs' } | { kind: 'pickup' } | { kind: 'stop' };

/** Worker process → harness. */
export type FromWorker =
  | ({ kind: 'ready' } & MemoryReading)
  | ({ kind: 'memory' } & MemoryReading)
  /** Handler runs so far in this process, every run counted (a job run twice counts twice). */
  | { kind: 'runs'; total: number }
  /** Pickup latencies since the last request, as [bucket, count] pairs (pickup-histogram.ts). */
  | { kind: 'pickup'; buckets: Array<[number, number]> }
  /** `at` is process.hrtime.bigint() as a string: CLOCK_MONOTONIC, comparable across processes. */
  | { kind: 'started'; seq: number; at: string; trace?: PickupTrace }
  /** After a graceful stop. `counts`: base64 of one byte per seq, the number of runs (saturating at 255). */
  /** `firstStartAt`: hrtime of the first job's start, as a string; null when no job ran. */
  | { kind: 'stopped'; counts: string; outOfRange: number; firstStartAt: string | null }
  | { kind: 'failed'; error: string };

export const WORKER_CONFIG_ENV = 'BENCH_WORKER';

/** application_name of every connection a worker process opens (PGAPPNAME), so the harness can count them. */
export const WORKER_APPLICATION_NAME = 'bench-worker';
