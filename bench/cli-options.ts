export const SCENARIO_NAMES = ['bulk-enqueue', 'single-enqueue', 'drain', 'pickup-latency', 'claim-latency', 'worker-rss', 'group-fairness'] as const;
export type ScenarioName = (typeof SCENARIO_NAMES)[number];

/** Sizes of every scenario; --quick shrinks them for a smoke run. */
export interface BenchSizes {
  bulkJobs: number;
  singleJobs: number;
  drainJobs: number;
  drainConcurrency: number[];
  drainProcesses: number[];
  /**
   * Each system drains each configuration this many times; its figure is the median. Five, not
   * three: a single 20,000-job drain on a shared 2-core machine moves by a tenth or more either
   * way, for the reference as much as for us.
   */
  drainRounds: number;
  /** Rounds of the bulk enqueue, single enqueue and pickup scenarios; figures are medians. */
  shortRounds: number;
  pickupJobs: number;
  pickupRatePerSecond: number;
  /** Finished rows retained in the table, one latency measurement per level (ascending). */
  claimRetained: number[];
  claimSamples: number;
  claimRatePerSecond: number;
  rssJobs: number;
  rssWarmupJobs: number;
  rssConcurrency: number;
  rssEnqueueChunk: number;
  /** Jobs of the one noisy group enqueued before the small groups' (group-fairness). */
  groupBacklog: number;
  /** Jobs of each group-fairness drain (over groups, and without). */
  groupDrainJobs: number;
  /** Concurrency of the untimed drains that check exactly-once after enqueue scenarios. */
  verifyConcurrency: number;
}

/** `npm run bench -- soak`: a steady load near capacity for a number of minutes, retention on. */
export interface SoakOptions {
  minutes: number;
  /** `retention.completedMs: 0` instead of `retentionMs`. */
  deleteOnComplete: boolean;
  /** `retention.completedMs` of the soak's workers: short enough to reach a steady state within the run. */
  retentionMs: number;
  workers: number;
  concurrency: number;
  /** The rate held, as a share of the capacity measured first. */
  load: number;
  /** A fixed rate instead (jobs/s): the capacity is not measured. */
  rate: number | null;
  /**
   * Run on the jobs table before the soak, after `ALTER TABLE job_queue.jobs` (e.g.
   * "RESET (autovacuum_vacuum_scale_factor)"): for comparing storage settings.
   */
  alterJobs: string | null;
}

export interface BenchOptions {
  compare: boolean;
  /** Set for `soak`: that runs instead of the scenarios. */
  soak: SoakOptions | null;
  /** Systems to run, in report order; `--compare` means all four. */
  systems: string[] | null;
  quick: boolean;
  only: ScenarioName[] | null;
  sizes: BenchSizes;
}

const FULL: BenchSizes = {
  bulkJobs: 20_000,
  singleJobs: 2_000,
  drainJobs: 20_000,
  drainConcurrency: [10, 50],
  drainProcesses: [1, 2],
  drainRounds: 5,
  shortRounds: 3,
  pickupJobs: 500,
  pickupRatePerSecond: 100,
  claimRetained: [0, 1_000_000, 5_000_000],
  claimSamples: 200,
  claimRatePerSecond: 50,
  rssJobs: 200_000,
  rssWarmupJobs: 10_000,
  rssConcurrency: 10,
  rssEnqueueChunk: 10_000,
  groupBacklog: 100_000,
  groupDrainJobs: 20_000,
  verifyConcurrency: 50,
};

const QUICK: BenchSizes = {
  ...FULL,
  bulkJobs: 2_000,
  singleJobs: 500,
  drainJobs: 2_000,
  drainRounds: 1,
  shortRounds: 1,
  pickupJobs: 300,
  claimRetained: [0, 100_000],
  claimSamples: 100,
  rssJobs: 100_000,
  rssWarmupJobs: 5_000,
  groupBacklog: 20_000,
  groupDrainJobs: 5_000,
};

const DEFAULT_SOAK: SoakOptions = {
  minutes: 10,
  deleteOnComplete: false,
  retentionMs: 60_000,
  workers: 2,
  concurrency: 10,
  load: 0.8,
  rate: null,
  alterJobs: null,
};

const USAGE = `Usage: npm run bench -- [--compare] [--quick] [--only <scenario>[,<scenario>…]] [--systems <system>[,…]] [--workers <n>[,…]]
       npm run bench -- soak [--minutes N] [--delete-on-complete] [--retention-ms MS] [--workers N] [--concurrency N]
                             [--load F | --rate N] [--alter-jobs "<ALTER TABLE action>"]
  --compare  also run the reference SKIP LOCKED queue, graphile-worker and pg-boss; print ratios to the reference
  --quick    smaller sizes, for a smoke run
  --only     run only these scenarios: ${SCENARIO_NAMES.join(', ')}
  --systems  run only these systems (implies --compare): auto-job-queue, reference, graphile-worker, pg-boss,
             ajq-async-claims (auto-job-queue with synchronousClaims: false), and ajq-delete and reference-delete
             (each completion deletes its job; ajq-delete's drain ratios pair with reference-delete)
  --workers  the drain's worker process counts (default 1,2), e.g. 1,2,4 for the scale-out figures
soak: auto-job-queue at a steady rate (--load of the capacity it measures first, default 0.8) from a producer
  process for --minutes (default 10), --workers worker processes (default 2) at --concurrency (default 10),
  retention.completedMs --retention-ms (default 60000) or 0 with --delete-on-complete; a table per minute, checks at the end.
  --rate holds that many jobs/s without measuring the capacity; --alter-jobs runs ALTER TABLE job_queue.jobs <action> first
Environment: DATABASE_URL (else an embedded PostgreSQL); BENCH_TRACE_SQL=1 prints each worker process's statements per job;
  BENCH_CPU_PROF=<dir> writes a V8 CPU profile of each worker process there; BENCH_WORKER_NODE_ARGS="<flags>" passes Node/V8
  flags to each worker process (for example --trace-opt, which NODE_OPTIONS does not allow).
`;

export function parseBenchOptions(argv: readonly string[]): BenchOptions {
  let compare = false;
  let quick = false;
  let only: ScenarioName[] | null = null;
  let systems: string[] | null = null;
  let workers: number[] | null = null;
  let soak: SoakOptions | null = null;
  const valueOf = (i: number, name: string): string => {
    const arg = argv[i];
    const value = arg === name ? argv[i + 1] : arg.slice(name.length + 1);
    if (!value) throw new Error(`${name} needs a value\n${USAGE}`);
    return value;
  };
  const is = (arg: string, name: string) => arg === name || arg.startsWith(`${name}=`);
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const step = (name: string) => (arg === name ? 1 : 0);
    if (i === 0 && arg === 'soak') soak = { ...DEFAULT_SOAK };
    else if (soak && is(arg, '--minutes')) {
      soak.minutes = number('--minutes', valueOf(i, '--minutes'), 3);
      i += step('--minutes');
    } else if (soak && arg === '--delete-on-complete') soak.deleteOnComplete = true;
    else if (soak && is(arg, '--retention-ms')) {
      soak.retentionMs = number('--retention-ms', valueOf(i, '--retention-ms'), 1);
      i += step('--retention-ms');
    } else if (soak && is(arg, '--concurrency')) {
      soak.concurrency = number('--concurrency', valueOf(i, '--concurrency'), 1);
      i += step('--concurrency');
    } else if (soak && is(arg, '--load')) {
      soak.load = Number(valueOf(i, '--load'));
      if (!(soak.load > 0 && soak.load <= 1)) throw new Error(`--load must be a share of the capacity, above 0 and at most 1\n${USAGE}`);
      i += step('--load');
    } else if (soak && is(arg, '--rate')) {
      soak.rate = number('--rate', valueOf(i, '--rate'), 1);
      i += step('--rate');
    } else if (soak && is(arg, '--alter-jobs')) {
      soak.alterJobs = valueOf(i, '--alter-jobs');
      i += step('--alter-jobs');
    } else if (is(arg, '--workers')) {
      workers = valueOf(i, '--workers').split(',').map((n) => number('--workers', n.trim(), 1));
      i += step('--workers');
    } else if (arg === '--compare') compare = true;
    else if (arg === '--quick') quick = true;
    else if (arg === '--only' || arg.startsWith('--only=')) {
      const value = arg === '--only' ? argv[++i] : arg.slice('--only='.length);
      if (!value) throw new Error(`--only needs a scenario name\n${USAGE}`);
      only = [...(only ?? []), ...value.split(',').map((name) => scenarioName(name.trim()))];
    } else if (arg === '--systems' || arg.startsWith('--systems=')) {
      const value = arg === '--systems' ? argv[++i] : arg.slice('--systems='.length);
      if (!value) throw new Error(`--systems needs system names\n${USAGE}`);
      systems = [...(systems ?? []), ...value.split(',').map((name) => name.trim())];
      compare = true;
    } else if (arg === '--help' || arg === '-h') {
      throw new Error(USAGE);
    } else {
      throw new Error(`unknown argument "${arg}"\n${USAGE}`);
    }
  }
  if (soak) {
    if (workers) {
      if (workers.length !== 1) throw new Error(`soak takes one --workers count\n${USAGE}`);
      soak.workers = workers[0];
    }
    return { compare: false, systems: null, quick: false, only: null, soak, sizes: FULL };
  }
  const sizes = quick ? QUICK : FULL;
  return { compare, systems, quick, only, soak: null, sizes: workers ? { ...sizes, drainProcesses: workers } : sizes };
}

function number(name: string, value: string, min: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name} must be an integer of at least ${min} (got ${JSON.stringify(value)})\n${USAGE}`);
  return n;
}

function scenarioName(name: string): ScenarioName {
  if ((SCENARIO_NAMES as readonly string[]).includes(name)) return name as ScenarioName;
  throw new Error(`unknown scenario "${name}"\n${USAGE}`);
}
