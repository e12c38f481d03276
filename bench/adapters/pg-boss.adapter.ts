import type { BenchDatabase } from '../bench-database.js';
import { expectOnlyStatus } from './finished-check.js';
import { BENCH_JOB_TYPE, benchPayload, type AdapterSettings, type BenchPayload, type BenchProducer, type QueueAdapter } from './queue-adapter.js';

/**
 * pg-boss 10 has no LISTEN/NOTIFY: each work() loop fetches up to `batchSize` jobs, hands them to
 * the handler as one array, completes them in one statement, and polls again after
 * `pollingIntervalSeconds` (0.5 s is the documented minimum). Throughput therefore comes from the
 * batch size; the handler runs the batch with at most `concurrency` jobs in flight.
 */
const BATCH_SIZE = 1_000;
const POLLING_INTERVAL_SECONDS = 0.5;
const POOL_SIZE = 10;

type PgBossInstance = InstanceType<Awaited<ReturnType<typeof pgBoss>>>;

async function pgBoss() {
  return (await import('pg-boss')).default;
}

async function startBoss(url: string, role: 'install' | 'producer' | 'worker'): Promise<PgBossInstance> {
  const PgBoss = await pgBoss();
  const boss = new PgBoss({
    connectionString: url,
    max: POOL_SIZE,
    migrate: role === 'install',
    // Maintenance and cron run in worker processes, as pg-boss's defaults would have it.
    supervise: role === 'worker',
    schedule: false,
  });
  boss.on('error', (error) => process.stderr.write(`pg-boss error: ${error.message}\n`));
  await boss.start();
  return boss;
}

/** Runs `fn` over `items` with at most `limit` calls in flight. */
async function forEachLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void> | void): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]);
  });
  await Promise.all(lanes);
}

export const pgBossAdapter: QueueAdapter = {
  name: 'pg-boss',
  retainedRowsNote: "pgboss.job rows with state 'completed' (completed within the hour, so maintenance keeps them)",

  settings(concurrency: number): AdapterSettings {
    return {
      batchSize: BATCH_SIZE,
      'jobs in flight': `${concurrency} (the handler runs each batch at this concurrency)`,
      pollingIntervalSeconds: POLLING_INTERVAL_SECONDS,
      max: POOL_SIZE,
      'work() calls per process': 1,
      wakeUp: 'polling only (no LISTEN/NOTIFY in pg-boss 10)',
    };
  },

  async install(url) {
    const boss = await startBoss(url, 'install');
    await boss.createQueue(BENCH_JOB_TYPE);
    await boss.stop({ graceful: false, wait: true });
  },

  async openProducer(url): Promise<BenchProducer> {
    const boss = await startBoss(url, 'producer');
    return {
      async enqueueMany(seqs, stampedAt) {
        await boss.insert(seqs.map((seq) => ({ name: BENCH_JOB_TYPE, data: benchPayload(seq, stampedAt) })));
      },
      async enqueue(seq) {
        await boss.send(BENCH_JOB_TYPE, { seq });
      },
      close: () => boss.stop({ graceful: false, wait: true }),
    };
  },

  async hasUnfinished(db: BenchDatabase) {
    const [row] = await db.query<{ any: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM pgboss.job WHERE name = $1 AND state < 'completed') AS any`,
      [BENCH_JOB_TYPE],
    );
    return row.any;
  },

  async checkFinished(db, expected, retained) {
    const rows = await db.query<{ status: string; n: number }>(
      `SELECT state::text AS status, count(*)::int AS n FROM pgboss.job WHERE name = $1 GROUP BY state`,
      [BENCH_JOB_TYPE],
    );
    return expectOnlyStatus(rows, 'completed', expected + retained);
  },

  async retainFinished(db, count) {
    await db.query(
      `INSERT INTO pgboss.job (name, data, state, started_on, completed_on, created_on, start_after)
       SELECT $1, jsonb_build_object('retained', g), 'completed', t, t, t, t
       FROM generate_series(1, $2::int) AS g, LATERAL (SELECT now() - (g % 3600) * interval '1 second' AS t) AS at`,
      [BENCH_JOB_TYPE, count],
    );
    await db.query(`VACUUM ANALYZE pgboss.job`);
  },

  async startWorker(url, concurrency, onJob) {
    const boss = await startBoss(url, 'worker');
    await boss.work<BenchPayload>(
      BENCH_JOB_TYPE,
      { batchSize: BATCH_SIZE, pollingIntervalSeconds: POLLING_INTERVAL_SECONDS },
      (jobs) => forEachLimited(jobs, concurrency, (job) => onJob(job.data)),
    );
    return { stop: () => boss.stop({ graceful: true, wait: true, timeout: 30_000 }) };
  },
};
