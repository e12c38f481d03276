import type { AdapterName } from '../adapters/queue-adapter.js';

/** How the harness configures a producer process (JSON in the BENCH_PRODUCER environment variable). */
export interface ProducerProcessConfig {
  adapter: AdapterName;
  url: string;
  /** Jobs seq 0 … count-1, enqueued evenly at this rate from the `start` message on. */
  ratePerSecond: number;
  count: number;
  /** Enqueues at most this often: each call carries the jobs that came due since the last one. */
  tickMs: number;
}

export const PRODUCER_CONFIG_ENV = 'BENCH_PRODUCER';

/** Harness → producer process. */
export type ToProducer = { kind: 'start' } | { kind: 'progress' } | { kind: 'stop' };

/** Producer process → harness. */
export type FromProducer =
  | { kind: 'ready' }
  /** Jobs enqueued so far (committed), and how far the enqueues ran behind the schedule at most. */
  | { kind: 'progress'; enqueued: number; maxLagMs: number }
  | { kind: 'done'; enqueued: number; seconds: number; maxLagMs: number }
  | { kind: 'failed'; error: string };
