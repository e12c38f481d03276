export const SCENARIO_NAMES = ['bulk-enqueue', 'single-enqueue', 'drain', 'pickup-latency', 'claim-latency', 'worker-rss'] as const;
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
  /** Concurrency of the untimed drains that check exactly-once after enqueue scenarios. */
  verifyConcurrency: number;
}

export interface BenchOptions {
  compare: boolean;
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
};

const USAGE = `Usage: npm run bench -- [--compare] [--quick] [--only <scenario>[,<scenario>…]]
  --compare  also run the reference SKIP LOCKED queue, graphile-worker and pg-boss; print ratios to the reference
  --quick    smaller sizes, for a smoke run
  --only     run only these scenarios: ${SCENARIO_NAMES.join(', ')}
  --systems  run only these systems (implies --compare): auto-job-queue, reference, graphile-worker, pg-boss,
             and ajq-async-claims (auto-job-queue with synchronousClaims: false)
Environment: DATABASE_URL (else an embedded PostgreSQL); BENCH_TRACE_SQL=1 prints each worker process's statements per job;
  BENCH_CPU_PROF=<dir> writes a V8 CPU profile of each worker process there; BENCH_WORKER_NODE_ARGS="<flags>" passes Node/V8
  flags to each worker process (for example --trace-opt, which NODE_OPTIONS does not allow).
`;

export function parseBenchOptions(argv: readonly string[]): BenchOptions {
  let compare = false;
  let quick = false;
  let only: ScenarioName[] | null = null;
  let systems: string[] | null = null;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--compare') compare = true;
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
  return { compare, systems, quick, only, sizes: quick ? QUICK : FULL };
}

function scenarioName(name: string): ScenarioName {
  if ((SCENARIO_NAMES as readonly string[]).includes(name)) return name as ScenarioName;
  throw new Error(`unknown scenario "${name}"\n${USAGE}`);
}
