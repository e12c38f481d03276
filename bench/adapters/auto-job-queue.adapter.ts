import { NestFactory } from '@nestjs/core';
import { JobProducer, type JobQueueOptions } from '../../src/index.js';
import type { BenchDatabase } from '../bench-database.js';
import { BenchQueueAppModule } from './auto-job-queue.app.js';
import { expectOnlyStatus } from './finished-check.js';
import { BENCH_JOB_TYPE, benchPayload, type AdapterName, type AdapterSettings, type BenchProducer, type BenchWorker, type QueueAdapter } from './queue-adapter.js';

/** Library defaults, printed so the report says what ran. */
const POLL_INTERVAL_MS = 1_000;
const LEASE_MS = 30_000;

const LOG_LEVELS: Array<'error' | 'warn'> = ['error', 'warn'];

/** auto-job-queue through its public API only: JobQueueModule in a Nest application context. */
export const autoJobQueueAdapter = autoJobQueueWith('auto-job-queue', {});

/**
 * The same with `synchronousClaims: false`, only when asked for by name (`--systems`): claims
 * that do not wait for their WAL flush, the setting that trades crash cases for pickup latency.
 */
export const autoJobQueueAsyncClaimsAdapter = autoJobQueueWith('ajq-async-claims', { synchronousClaims: false });

/**
 * `retention.completedMs: 0`, only when named in `--systems`: each completion deletes its job.
 * Its drain ratios pair with the reference that deletes on completion too.
 */
export const autoJobQueueDeleteAdapter = autoJobQueueWith('ajq-delete', { retention: { completedMs: 0 } }, 'reference-delete');

/** Module options a variant sets; the soak passes its own retention too. */
export type WorkerOptions = Pick<JobQueueOptions, 'synchronousClaims' | 'retention'>;

export function autoJobQueueWith(name: AdapterName, workerOptions: WorkerOptions, comparedWith?: AdapterName): QueueAdapter {
  const deletesOnComplete = workerOptions.retention?.completedMs === 0;
  return {
    name,
    comparedWith,
    deletesOnComplete,
    retainedRowsNote: "job_queue.jobs rows with status 'completed'",

    settings(concurrency: number): AdapterSettings {
      return {
        concurrency,
        pollIntervalMs: POLL_INTERVAL_MS,
        leaseMs: LEASE_MS,
        listen: true,
        pool: 'TypeORM default (10)',
        ...Object.fromEntries(Object.entries(workerOptions).map(([key, value]) => [key, JSON.stringify(value)])),
        other: Object.keys(workerOptions).length > 0 ? 'library defaults otherwise' : 'library defaults',
      };
    },

    async install(url) {
      // autoMigrate (the default) creates the tables at boot.
      const app = await NestFactory.createApplicationContext(BenchQueueAppModule.producer(url), { logger: LOG_LEVELS });
      await app.close();
    },

    async openProducer(url): Promise<BenchProducer> {
      const app = await NestFactory.createApplicationContext(BenchQueueAppModule.producer(url), { logger: LOG_LEVELS });
      const producer = app.get(JobProducer);
      return {
        async enqueueMany(seqs, stampedAt) {
          await producer.enqueueMany(seqs.map((seq) => ({ type: BENCH_JOB_TYPE, payload: benchPayload(seq, stampedAt) })));
        },
        async enqueue(seq) {
          await producer.enqueue(BENCH_JOB_TYPE, { seq });
        },
        close: () => app.close(),
      };
    },

    async hasUnfinished(db: BenchDatabase) {
      const [row] = await db.query<{ any: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM job_queue.jobs WHERE type = $1 AND status IN ('pending', 'failed', 'processing')) AS any`,
        [BENCH_JOB_TYPE],
      );
      return row.any;
    },

    async checkFinished(db, expected, retained) {
      const rows = await db.query<{ status: string; n: number }>(
        `SELECT status, count(*)::int AS n FROM job_queue.jobs WHERE type = $1 GROUP BY status`,
        [BENCH_JOB_TYPE],
      );
      return expectOnlyStatus(rows, 'completed', (deletesOnComplete ? 0 : expected) + retained);
    },

    async retainFinished(db, count) {
      await db.query(
        `INSERT INTO job_queue.jobs (type, payload, status, attempts, max_attempts, worker_id, result,
                                     run_at, created_at, claimed_at, completed_at)
         SELECT $1, jsonb_build_object('retained', g), 'completed', 1, 5, 'retained', 'null'::jsonb, t, t, t, t
         FROM generate_series(1, $2::int) AS g, LATERAL (SELECT now() - (g % 3600) * interval '1 second' AS t) AS at`,
        [BENCH_JOB_TYPE, count],
      );
      await db.query(`VACUUM ANALYZE job_queue.jobs`);
    },

    async startWorker(url, concurrency, onJob): Promise<BenchWorker> {
      const app = await NestFactory.createApplicationContext(
        BenchQueueAppModule.worker({ ...workerOptions, concurrency, pollIntervalMs: POLL_INTERVAL_MS, leaseMs: LEASE_MS }, url, onJob),
        { logger: LOG_LEVELS },
      );
      return { stop: () => app.close() };
    },
  };
}
