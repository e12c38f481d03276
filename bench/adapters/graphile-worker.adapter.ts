import pg from 'pg';
import type { BenchDatabase } from '../bench-database.js';
import { BENCH_JOB_TYPE, benchPayload, type AdapterSettings, type BenchPayload, type BenchProducer, type QueueAdapter } from './queue-adapter.js';

/**
 * graphile-worker's documented performance configuration (worker.graphile.org/docs/performance):
 * a local queue of 500 jobs fetched in one batch, and completions batched (delay 0), with a pool
 * of 25. The local queue and pool do not depend on the concurrency.
 */
const LOCAL_QUEUE_SIZE = 500;
const COMPLETE_JOB_BATCH_DELAY_MS = 0;
const FAIL_JOB_BATCH_DELAY_MS = 0;
const MAX_POOL_SIZE = 25;
const PRODUCER_POOL_SIZE = 10;

async function graphile() {
  return import('graphile-worker');
}

/**
 * A pool this adapter owns and ends (awaited) itself: graphile-worker ends a pool it made
 * without awaiting it and drops its error handlers first, so a connection still closing when the
 * benchmark drops the database would crash the process.
 */
function ownPool(url: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  const report = (error: Error) => process.stderr.write(`graphile-worker pool: ${error.message}\n`);
  pool.on('error', report);
  // Checked-out clients need a handler too (graphile-worker warns without one).
  pool.on('connect', (client) => client.on('error', report));
  return pool;
}

/** Errors and warnings only, to stderr. */
async function quietLogger() {
  const { Logger } = await graphile();
  return new Logger(() => (level, message) => {
    if (level === 'error' || level === 'warning') process.stderr.write(`graphile-worker ${level}: ${message}\n`);
  });
}

export const graphileWorkerAdapter: QueueAdapter = {
  name: 'graphile-worker',
  retainedRowsNote:
    'graphile_worker._private_jobs rows permanently failed (attempts = max_attempts): ' +
    'it deletes completed jobs, so these are the finished rows it keeps',

  settings(concurrency: number): AdapterSettings {
    return {
      concurrentJobs: concurrency,
      maxPoolSize: MAX_POOL_SIZE,
      'localQueue.size': LOCAL_QUEUE_SIZE,
      completeJobBatchDelay: COMPLETE_JOB_BATCH_DELAY_MS,
      failJobBatchDelay: FAIL_JOB_BATCH_DELAY_MS,
      pollInterval: '2000 (default; wake-ups by LISTEN/NOTIFY)',
    };
  },

  async install(url) {
    const { runMigrations } = await graphile();
    const pool = ownPool(url, 2);
    try {
      await runMigrations({ pgPool: pool, logger: await quietLogger() });
    } finally {
      await pool.end();
    }
  },

  async openProducer(url): Promise<BenchProducer> {
    const { makeWorkerUtils } = await graphile();
    const pool = ownPool(url, PRODUCER_POOL_SIZE);
    const utils = await makeWorkerUtils({ pgPool: pool, logger: await quietLogger() });
    return {
      async enqueueMany(seqs, stampedAt) {
        await utils.addJobs(seqs.map((seq) => ({ identifier: BENCH_JOB_TYPE, payload: benchPayload(seq, stampedAt) })));
      },
      async enqueue(seq) {
        await utils.addJob(BENCH_JOB_TYPE, { seq });
      },
      close: async () => {
        await utils.release();
        await pool.end();
      },
    };
  },

  async hasUnfinished(db: BenchDatabase) {
    // Completed jobs are deleted; a job still waiting or running has attempts left.
    const [row] = await db.query<{ any: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM graphile_worker._private_jobs j
                      JOIN graphile_worker._private_tasks t ON t.id = j.task_id
                      WHERE t.identifier = $1 AND j.attempts < j.max_attempts) AS any`,
      [BENCH_JOB_TYPE],
    );
    return row.any;
  },

  async checkFinished(db, _expected, retained) {
    // Every completed job is deleted: the only rows left must be the retained ones.
    const [row] = await db.query<{ left: number; failed: number }>(
      `SELECT count(*)::int AS left, count(*) FILTER (WHERE j.last_error IS DISTINCT FROM 'retained')::int AS failed
       FROM graphile_worker._private_jobs j JOIN graphile_worker._private_tasks t ON t.id = j.task_id
       WHERE t.identifier = $1`,
      [BENCH_JOB_TYPE],
    );
    if (row.left === retained && row.failed === 0) return null;
    return `expected only the ${retained} retained rows left in _private_jobs, found ${row.left} (${row.failed} not retained)`;
  },

  async retainFinished(db, count) {
    await db.query(`INSERT INTO graphile_worker._private_tasks (identifier) VALUES ($1) ON CONFLICT DO NOTHING`, [BENCH_JOB_TYPE]);
    await db.query(
      `INSERT INTO graphile_worker._private_jobs (task_id, payload, attempts, max_attempts, last_error, run_at, created_at, updated_at)
       SELECT (SELECT id FROM graphile_worker._private_tasks WHERE identifier = $1), json_build_object('retained', g),
              25, 25, 'retained', t, t, t
       FROM generate_series(1, $2::int) AS g, LATERAL (SELECT now() - (g % 3600) * interval '1 second' AS t) AS at`,
      [BENCH_JOB_TYPE, count],
    );
    await db.query(`VACUUM ANALYZE graphile_worker._private_jobs`);
  },

  async startWorker(url, concurrency, onJob) {
    const { run } = await graphile();
    const pool = ownPool(url, MAX_POOL_SIZE);
    const runner = await run({
      pgPool: pool,
      noHandleSignals: true,
      logger: await quietLogger(),
      taskList: {
        [BENCH_JOB_TYPE]: async (payload) => {
          onJob(payload as BenchPayload);
        },
      },
      preset: {
        worker: {
          concurrentJobs: concurrency,
          maxPoolSize: MAX_POOL_SIZE,
          localQueue: { size: LOCAL_QUEUE_SIZE },
          completeJobBatchDelay: COMPLETE_JOB_BATCH_DELAY_MS,
          failJobBatchDelay: FAIL_JOB_BATCH_DELAY_MS,
        },
      },
    });
    return {
      async stop() {
        await runner.stop();
        await pool.end();
      },
    };
  },
};
