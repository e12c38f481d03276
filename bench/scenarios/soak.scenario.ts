import { setTimeout as sleep } from 'node:timers/promises';
import { adapterFor } from '../adapters/index.js';
import type { QueueAdapter } from '../adapters/queue-adapter.js';
import type { BenchDatabase } from '../bench-database.js';
import type { SoakOptions } from '../cli-options.js';
import { msBetween, now } from '../clock.js';
import { checkExactlyOnce, type ExactlyOnceResult } from '../exactly-once.js';
import { bucketPercentile, bucketTotal, type Buckets } from '../pickup-histogram.js';
import type { RunScope } from '../run-scope.js';
import { launchProducerProcess, type ProducerProcess } from '../workers/producer-launcher.js';
import type { WorkerProcess } from '../workers/worker-launcher.js';
import { type DatabaseCosts, measureDatabaseCosts } from './database-costs.js';
import { drainTimeoutMs, waitUntilDrained, waitUntilRun } from './run-helpers.js';

/** Jobs drained to measure the burst rate the capacity probe starts from. */
const CAPACITY_JOBS = 20_000;
/** The capacity probe: how long the producer offers more than the workers can take, and how much of it is warm-up. */
const PROBE_SECONDS = 20;
const PROBE_WARM_UP_SECONDS = 5;
const MINUTE_MS = 60_000;
/** The producer enqueues at most this often (each call carries what came due meanwhile). */
const TICK_MS = 10;

/** One minute of the soak. */
export interface SoakMinute {
  minute: number;
  /** Jobs started per second over the minute (every started job completes: no handler fails). */
  jobsPerSecond: number;
  enqueuedPerSecond: number;
  pickupP50Ms: number;
  pickupP99Ms: number;
  /** pg_total_relation_size, pg_relation_size and pg_indexes_size of the jobs table, MB. */
  tableMB: number;
  heapMB: number;
  indexesMB: number;
  deadTuples: number;
  liveTuples: number;
  /** Jobs waiting (pending or failed) at the minute's end. */
  waiting: number;
  autovacuums: number;
  /** Of the jobs table's updates this minute, the share that were HOT. */
  hotUpdateShare: number;
  /** WAL and PostgreSQL CPU (autovacuum included) per job started this minute: server-wide (database-costs.ts). */
  walKBPerJob: number;
  pgCpuUsPerJob: number | null;
}

export interface SoakCheck {
  check: string;
  pass: boolean;
  detail: string;
}

export interface SoakReport {
  options: SoakOptions;
  adapter: string;
  capacityPerSecond: number;
  ratePerSecond: number;
  jobs: number;
  minutes: SoakMinute[];
  checks: SoakCheck[];
  exactlyOnce: ExactlyOnceResult;
  /** pg_stat_user_tables' vacuum counters and the jobs table's storage settings at the end. */
  table: Record<string, unknown>;
}

interface TableStats {
  total: number;
  heap: number;
  indexes: number;
  dead: number;
  live: number;
  autovacuums: number;
  updates: number;
  hotUpdates: number;
  waiting: number;
}

/**
 * A steady load near capacity, with retention on, for `minutes`: the capacity is measured first
 * (what the soak's worker processes sustain beside a producer process, on a database of its own:
 * measureCapacity), then a producer process enqueues at `load` × that rate while fresh worker
 * processes drain, and each
 * minute records throughput, pickup, the jobs table's size and its dead tuples. It stops by
 * itself once every job has run, then checks that throughput and pickup stayed flat, that the
 * table stayed bounded, and that every job ran exactly once.
 */
export async function runSoak(options: SoakOptions, adminUrl: string, scope: RunScope, log: (line: string) => void): Promise<SoakReport> {
  const name = options.deleteOnComplete ? 'ajq-delete' : 'auto-job-queue';
  const retentionMs = options.deleteOnComplete ? 0 : options.retentionMs;
  const adapter = adapterFor(name, retentionMs);
  const workerConfig = { adapter: name, concurrency: options.concurrency, reportStarts: false, retentionMs } as const;

  const capacity = options.rate === null ? await measureCapacity(adapter, scope, options, workerConfig, log) : Number.NaN;
  const rate = options.rate ?? Math.max(1, Math.round(capacity * options.load));
  const jobs = rate * options.minutes * 60;
  if (options.rate === null) {
    log(`  capacity ${Math.round(capacity)} jobs/s (sustained by ${options.workers} worker process(es) beside a producer process);`);
  }
  log(`  holding ${rate} jobs/s for ${options.minutes} min: ${jobs.toLocaleString('en-US')} jobs, retention.completedMs ${retentionMs}`);

  const db = await scope.database(adapter);
  if (options.alterJobs) await db.query(`ALTER TABLE job_queue.jobs ${options.alterJobs}`);
  const workers = await scope.workers(options.workers, { ...workerConfig, url: db.url, expectedJobs: jobs, pickupHistogram: true });
  let producer: ProducerProcess | null = null;
  try {
    producer = await launchProducerProcess({ adapter: name, url: db.url, ratePerSecond: rate, count: jobs, tickMs: TICK_MS });
    const minutes: SoakMinute[] = [];
    const started = now();
    producer.start();
    let last = { runs: 0, enqueued: 0, stats: await tableStats(db) };
    let costs = await measureDatabaseCosts(db);
    for (let minute = 1; minute <= options.minutes; minute++) {
      const waitMs = minute * MINUTE_MS - msBetween(started, now());
      // A producer that fails ends the wait (and the soak) at once.
      if (waitMs > 0) await Promise.race([sleep(waitMs), producer.done.then(() => sleep(waitMs))]);
      const [runs, pickups, progress, stats, spent] = await Promise.all([
        Promise.all(workers.map((w) => w.runs())).then((all) => all.reduce((a, b) => a + b, 0)),
        Promise.all(workers.map((w) => w.pickups())),
        producer.progress(),
        tableStats(db),
        costs.end(),
      ]);
      costs = await measureDatabaseCosts(db);
      const row = minuteRow(minute, runs - last.runs, progress.enqueued - last.enqueued, pickups, stats, last.stats, spent);
      minutes.push(row);
      log(`  ${formatMinute(row)}`);
      last = { runs, enqueued: progress.enqueued, stats };
    }
    const produced = await producer.done;
    await waitUntilRun(workers, jobs, drainTimeoutMs(jobs));
    await waitUntilDrained(adapter, db, drainTimeoutMs(jobs), 100);
    const table = await tableSettings(db);
    const counts = await scope.stopWorkers(workers);
    const exactlyOnce = checkExactlyOnce(jobs, counts, await onlyCompleted(db));
    log(`  producer: ${produced.enqueued.toLocaleString('en-US')} jobs in ${produced.seconds.toFixed(1)} s, at most ${produced.maxLagMs.toFixed(0)} ms behind schedule`);
    return { options, adapter: name, capacityPerSecond: capacity, ratePerSecond: rate, jobs, minutes, checks: soakChecks(minutes, exactlyOnce), exactlyOnce, table };
  } catch (error) {
    scope.killWorkers(workers);
    throw error;
  } finally {
    if (producer) await Promise.race([producer.stop(), sleep(10_000).then(() => producer!.kill())]);
  }
}

/**
 * The rate the soak's worker processes sustain with a producer process beside them, on a database
 * of its own (then dropped). A drain of CAPACITY_JOBS enqueued in bulk gives the burst rate; but
 * on a machine the producer shares, a burst rate is not sustained: at 80 % of one (39,000 jobs/s),
 * the first soak fell behind within two minutes. So a producer process then offers 1.25× the
 * burst rate for PROBE_SECONDS, and the capacity is the jobs started per second over the probe
 * after its first PROBE_WARM_UP_SECONDS: what the workers sustain, or, when they keep up with all
 * of it, a lower bound (a larger offer would leave a longer backlog to drain). Every job of both
 * runs is checked to have run once.
 */
async function measureCapacity(
  adapter: QueueAdapter,
  scope: RunScope,
  options: SoakOptions,
  config: { adapter: QueueAdapter['name']; concurrency: number; reportStarts: false; retentionMs: number },
  log: (line: string) => void,
): Promise<number> {
  const db = await scope.database(adapter);
  const producer = await scope.producer(adapter, db);
  let workers = await scope.workers(options.workers, { ...config, url: db.url, expectedJobs: CAPACITY_JOBS });
  let probe: ProducerProcess | null = null;
  try {
    const started = now();
    await producer.enqueueMany(Array.from({ length: CAPACITY_JOBS }, (_, i) => i));
    await waitUntilRun(workers, CAPACITY_JOBS, drainTimeoutMs(CAPACITY_JOBS));
    const finished = await waitUntilDrained(adapter, db, drainTimeoutMs(CAPACITY_JOBS), 2);
    const burst = (CAPACITY_JOBS / msBetween(started, finished)) * 1000;
    await verify(scope, workers, CAPACITY_JOBS, db, 'the burst drain');

    const offered = Math.round(burst * 1.25);
    const count = offered * PROBE_SECONDS;
    workers = await scope.workers(options.workers, { ...config, url: db.url, expectedJobs: count });
    probe = await launchProducerProcess({ adapter: adapter.name, url: db.url, ratePerSecond: offered, count, tickMs: TICK_MS });
    const runs = async () => (await Promise.all(workers.map((w) => w.runs()))).reduce((a, b) => a + b, 0);
    const probeStarted = now();
    probe.start();
    await sleep(PROBE_WARM_UP_SECONDS * 1000);
    const [from, fromAt] = [await runs(), now()];
    await sleep(Math.max(0, PROBE_SECONDS * 1000 - msBetween(probeStarted, now())));
    const [to, toAt] = [await runs(), now()];
    const sustained = ((to - from) / msBetween(fromAt, toAt)) * 1000;
    const all = sustained >= offered * 0.98 ? ': all of it, so the capacity is at least that' : '';
    log(`  burst drain ${Math.round(burst)} jobs/s; with a producer offering ${offered} jobs/s, the workers kept up ${Math.round(sustained)} jobs/s${all}`);
    await probe.done;
    await waitUntilRun(workers, count, drainTimeoutMs(count));
    await waitUntilDrained(adapter, db, drainTimeoutMs(count), 100);
    await verify(scope, workers, count, db, 'the capacity probe');
    return sustained;
  } catch (error) {
    scope.killWorkers(workers);
    throw error;
  } finally {
    if (probe) await probe.stop().catch(() => probe!.kill());
    await scope.closeProducer(producer);
    await scope.dropDatabase(db);
  }
}

/** Stops the workers and throws unless every job of seq 0 … jobs-1 ran exactly once. */
async function verify(scope: RunScope, workers: readonly WorkerProcess[], jobs: number, db: BenchDatabase, what: string): Promise<void> {
  const counts = await scope.stopWorkers(workers);
  const check = checkExactlyOnce(jobs, counts, await onlyCompleted(db));
  if (!check.ok) throw new Error(`${what} did not run every job exactly once: ${JSON.stringify(check)}`);
}

async function tableStats(db: BenchDatabase): Promise<TableStats> {
  const [row] = await db.query<Record<keyof TableStats, string>>(
    `SELECT pg_total_relation_size('job_queue.jobs') AS total, pg_relation_size('job_queue.jobs') AS heap,
            pg_indexes_size('job_queue.jobs') AS indexes, s.n_dead_tup AS dead, s.n_live_tup AS live,
            s.autovacuum_count AS autovacuums, s.n_tup_upd AS updates, s.n_tup_hot_upd AS "hotUpdates",
            (SELECT count(*) FROM (SELECT 1 FROM job_queue.jobs WHERE status IN ('pending', 'failed') LIMIT 10000000) w) AS waiting
     FROM pg_stat_user_tables s WHERE s.relid = 'job_queue.jobs'::regclass`,
  );
  return Object.fromEntries(Object.entries(row).map(([key, value]) => [key, Number(value)])) as unknown as TableStats;
}

async function tableSettings(db: BenchDatabase): Promise<Record<string, unknown>> {
  const [row] = await db.query(
    `SELECT c.reloptions, s.vacuum_count, s.autovacuum_count, s.analyze_count, s.autoanalyze_count, s.last_autovacuum::text
     FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = 'job_queue.jobs'::regclass`,
  );
  return row;
}

/** null when the benchmark jobs left are all completed (retention deletes them at its own pace). */
async function onlyCompleted(db: BenchDatabase): Promise<string | null> {
  const rows = await db.query<{ status: string; n: number }>(`SELECT status, count(*)::int AS n FROM job_queue.jobs GROUP BY status`);
  const others = rows.filter((row) => row.status !== 'completed');
  return others.length === 0 ? null : `expected only completed rows, found ${rows.map((r) => `${r.status}=${r.n}`).join(', ')}`;
}

function minuteRow(
  minute: number,
  runs: number,
  enqueued: number,
  pickups: Buckets[],
  stats: TableStats,
  before: TableStats,
  spent: DatabaseCosts,
): SoakMinute {
  const updates = stats.updates - before.updates;
  const mb = (bytes: number) => bytes / 1024 / 1024;
  return {
    minute,
    jobsPerSecond: runs / 60,
    enqueuedPerSecond: enqueued / 60,
    pickupP50Ms: bucketTotal(pickups) > 0 ? bucketPercentile(pickups, 50) : Number.NaN,
    pickupP99Ms: bucketTotal(pickups) > 0 ? bucketPercentile(pickups, 99) : Number.NaN,
    tableMB: mb(stats.total),
    heapMB: mb(stats.heap),
    indexesMB: mb(stats.indexes),
    deadTuples: stats.dead,
    liveTuples: stats.live,
    waiting: stats.waiting,
    autovacuums: stats.autovacuums,
    hotUpdateShare: updates > 0 ? (stats.hotUpdates - before.hotUpdates) / updates : 0,
    walKBPerJob: runs > 0 ? spent.walBytes / runs / 1024 : Number.NaN,
    pgCpuUsPerJob: runs > 0 && spent.cpuMs !== null ? (spent.cpuMs * 1000) / runs : null,
  };
}

/** Flat: the last minute against the second (the first one warms up). */
function soakChecks(minutes: readonly SoakMinute[], exactlyOnce: ExactlyOnceResult): SoakCheck[] {
  const second = minutes[1];
  const final = minutes[minutes.length - 1];
  const within = (check: string, last: number, base: number, ok: boolean, unit: string): SoakCheck => {
    const digits = unit === 'ms' ? 2 : unit === 'MB' ? 1 : 0;
    return { check, pass: ok, detail: `minute ${final.minute} ${fmt(last, digits)} ${unit} vs minute 2 ${fmt(base, digits)} ${unit} (${fmt(last / base, 2)}×)` };
  };
  return [
    within(
      'throughput flat: last minute within 15 % of the second',
      final.jobsPerSecond,
      second.jobsPerSecond,
      Math.abs(final.jobsPerSecond / second.jobsPerSecond - 1) <= 0.15,
      'jobs/s',
    ),
    within('pickup p50 flat: last minute at most 15 % above the second', final.pickupP50Ms, second.pickupP50Ms, final.pickupP50Ms <= second.pickupP50Ms * 1.15, 'ms'),
    within('pickup p99 flat: last minute at most 15 % above the second', final.pickupP99Ms, second.pickupP99Ms, final.pickupP99Ms <= second.pickupP99Ms * 1.15, 'ms'),
    within('table size bounded: last minute at most 1.5× the second', final.tableMB, second.tableMB, final.tableMB <= second.tableMB * 1.5, 'MB'),
    { check: 'exactly once: every job ran once', pass: exactlyOnce.ok, detail: `${exactlyOnce.runs.toLocaleString('en-US')} runs of ${exactlyOnce.expected.toLocaleString('en-US')} jobs${exactlyOnce.database ? `; ${exactlyOnce.database}` : ''}` },
  ];
}

const HEADER =
  'min   jobs/s  enqueued/s  pickup p50  p99 (ms)  table MB  heap MB  indexes MB  dead tuples  live tuples  waiting  autovacuums  HOT' +
  '  WAL kB/job  PG µs/job';

function formatMinute(m: SoakMinute): string {
  return [
    String(m.minute).padStart(3),
    fmt(m.jobsPerSecond).padStart(8),
    fmt(m.enqueuedPerSecond).padStart(11),
    fmt(m.pickupP50Ms, 2).padStart(11),
    fmt(m.pickupP99Ms, 2).padStart(9),
    fmt(m.tableMB, 1).padStart(9),
    fmt(m.heapMB, 1).padStart(8),
    fmt(m.indexesMB, 1).padStart(11),
    fmt(m.deadTuples).padStart(12),
    fmt(m.liveTuples).padStart(12),
    fmt(m.waiting).padStart(8),
    fmt(m.autovacuums).padStart(12),
    `${Math.round(m.hotUpdateShare * 100)} %`.padStart(5),
    fmt(m.walKBPerJob, 2).padStart(11),
    (m.pgCpuUsPerJob === null ? 'n/a' : fmt(m.pgCpuUsPerJob)).padStart(10),
  ].join(' ');
}

/** The per-minute table and the checks, as printed at the end. */
export function formatSoak(report: SoakReport): string {
  return [
    `Soak: ${report.adapter}, ${report.ratePerSecond} jobs/s` +
      (Number.isNaN(report.capacityPerSecond) ? ' (a fixed rate), ' : ` (${Math.round(report.options.load * 100)} % of ${Math.round(report.capacityPerSecond)}), `) +
      `${report.options.workers} worker process(es) at concurrency ${report.options.concurrency}, retention.completedMs ${report.options.deleteOnComplete ? 0 : report.options.retentionMs}`,
    HEADER,
    ...report.minutes.map(formatMinute),
    '',
    'Checks:',
    ...report.checks.map((c) => `  [${c.pass ? 'PASS' : 'FAIL'}] ${c.check}: ${c.detail}`),
  ].join('\n');
}

function fmt(n: number, digits = 0): string {
  return Number.isFinite(n) ? n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : 'n/a';
}
