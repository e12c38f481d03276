import pg from 'pg';
import { ReferenceWorker } from '../reference/reference-worker.js';
import { REFERENCE_SCHEMA, REFERENCE_SQL } from '../reference/reference.sql.js';
import { expectOnlyStatus } from './finished-check.js';
import { BENCH_JOB_TYPE, benchPayload, type AdapterName, type AdapterSettings, type BenchProducer, type QueueAdapter } from './queue-adapter.js';

const POOL_SIZE = 10;
const POLL_INTERVAL_MS = 1_000;
/** Claimed ahead into the local buffer: graphile-worker's documented local queue size. */
const PREFETCH = 500;

/** The hand-written minimal SKIP LOCKED queue of bench/reference: the "what Postgres allows" line. */
export const referenceAdapter = referenceWith('reference', false);

/**
 * The same queue deleting each job in its completion, as graphile-worker does (only when named in
 * `--systems`): the line auto-job-queue's `retention.completedMs: 0` is held to.
 */
export const referenceDeleteAdapter = referenceWith('reference-delete', true);

function referenceWith(name: AdapterName, deleteOnComplete: boolean): QueueAdapter {
  return {
    name,
    // A reference line itself: its drains pair with nothing.
    comparedWith: name,
    deletesOnComplete: deleteOnComplete,
    retainedRowsNote: "ref_jobs rows with status 'completed'",

    settings(concurrency: number): AdapterSettings {
      return {
        concurrency,
        pool: POOL_SIZE,
        pollIntervalMs: POLL_INTERVAL_MS,
        prefetch: PREFETCH,
        claim: 'one UPDATE … SKIP LOCKED fills a local buffer (prefetch + free slots) when it runs low',
        completion: `group commit: one fenced ${deleteOnComplete ? 'DELETE' : 'UPDATE'} for the jobs that finished while the previous one was written`,
        wakeUp: 'LISTEN/NOTIFY (statement trigger)',
      };
    },

    async install(url) {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query(REFERENCE_SCHEMA);
      } finally {
        await client.end();
      }
    },

    async openProducer(url): Promise<BenchProducer> {
      const pool = new pg.Pool({ connectionString: url, max: POOL_SIZE });
      // An idle connection the server ends (a failed run's database dropped WITH (FORCE)) must not crash the harness.
      pool.on('error', () => undefined);
      return {
        async enqueueMany(seqs, stampedAt) {
          await pool.query(REFERENCE_SQL.enqueueMany, [BENCH_JOB_TYPE, seqs.map((seq) => JSON.stringify(benchPayload(seq, stampedAt)))]);
        },
        async enqueue(seq) {
          await pool.query(REFERENCE_SQL.enqueueOne, [BENCH_JOB_TYPE, JSON.stringify({ seq })]);
        },
        close: () => pool.end(),
      };
    },

    async hasUnfinished(db) {
      const [row] = await db.query<{ any: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM ref_jobs WHERE status IN ('pending', 'processing')) AS any`,
      );
      return row.any;
    },

    async checkFinished(db, expected, retained) {
      return expectOnlyStatus(await db.query(REFERENCE_SQL.counts), 'completed', (deleteOnComplete ? 0 : expected) + retained);
    },

    async retainFinished(db, count) {
      await db.query(REFERENCE_SQL.retain, [BENCH_JOB_TYPE, count]);
      await db.query(`VACUUM ANALYZE ref_jobs`);
    },

    async startWorker(url, concurrency, onJob) {
      const worker = new ReferenceWorker(
        { url, type: BENCH_JOB_TYPE, concurrency, prefetch: PREFETCH, poolSize: POOL_SIZE, pollIntervalMs: POLL_INTERVAL_MS, deleteOnComplete },
        (payload) => onJob(payload as { seq: number }),
      );
      await worker.start();
      return worker;
    },
  };
}
