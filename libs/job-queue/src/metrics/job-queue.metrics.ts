import type { JobInstruments } from '../base/job-instruments.js';
import type { TalliedOutcome } from '../base/outcome-tally.js';
import { JobQueueConfigError } from '../errors/job-queue-config.error.js';
import { JOB_STATUSES } from '../base/job-status.js';
import type { JobStore } from '../persistence/job.store.js';
import type { Backpressure } from '../producer/backpressure.js';
import { CachedRead } from './cached-read.js';

/** The few prom-client shapes used here, so no declaration of ours names prom-client's types. */
interface Labelled {
  inc(labels: Record<string, string>, value?: number): void;
}
interface Observed {
  observe(labels: Record<string, string>, value: number): void;
}
interface Settable {
  set(labels: Record<string, string>, value: number): void;
  set(value: number): void;
  reset(): void;
}
interface Registry {
  registerMetric(metric: unknown): void;
  getSingleMetric(name: string): unknown;
  removeSingleMetric(name: string): void;
}
interface PromClient {
  register: Registry;
  Counter: new (config: Record<string, unknown>) => Labelled;
  Histogram: new (config: Record<string, unknown>) => Observed;
  Gauge: new (config: Record<string, unknown>) => Settable;
}

const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900];

export const METRIC_NAMES = [
  'job_queue_jobs_enqueued_total',
  'job_queue_jobs_completed_total',
  'job_queue_jobs_failed_total',
  'job_queue_jobs_dead_lettered_total',
  'job_queue_job_duration_seconds',
  'job_queue_job_wait_seconds',
  'job_queue_jobs',
  'job_queue_oldest_waiting_seconds',
  'job_queue_in_flight',
  'job_queue_saturated',
  'job_queue_circuit_open',
] as const;

/**
 * The queue's Prometheus series on the app's registry. Counters and histograms are updated in
 * memory as jobs go; the gauges read the database when scraped, through CachedRead, so scrapes
 * cost one read per `depthRefreshMs` per process at most.
 */
export class JobQueueMetrics implements JobInstruments {
  private inFlight: () => ReadonlyMap<string, number> = () => new Map();

  private constructor(
    private readonly registry: Registry,
    private readonly enqueuedTotal: Labelled,
    private readonly outcomes: Record<TalliedOutcome, Labelled>,
    private readonly duration: Observed,
    private readonly wait: Observed,
  ) {}

  /** Loads prom-client (an optional peer) and registers every series; a clear error if it is missing. */
  static async create(
    registryOption: unknown,
    store: Pick<JobStore, 'stats' | 'oldestWaiting' | 'openCircuits'>,
    backpressure: Pick<Backpressure, 'snapshot'>,
    depthRefreshMs: number,
  ): Promise<JobQueueMetrics> {
    let prom: PromClient;
    try {
      // A name the compiler does not resolve: prom-client is the app's dependency, not ours.
      const name = 'prom-client';
      const loaded = (await import(name)) as PromClient & { default?: PromClient };
      prom = loaded.Counter ? loaded : loaded.default!;
    } catch {
      throw new JobQueueConfigError('metrics needs the prom-client package: npm install prom-client (or turn metrics off).');
    }
    const registry = (registryOption as Registry | null) ?? prom.register;
    const taken = METRIC_NAMES.filter((name) => registry.getSingleMetric(name));
    if (taken.length > 0) {
      throw new JobQueueConfigError(
        `metrics: ${taken.join(', ')} ${taken.length === 1 ? 'is' : 'are'} already on this registry (another JobQueueModule?). Give each module a registry of its own: metrics: { registry }.`,
      );
    }
    const registers = [registry];
    const counter = (name: string, help: string) => new prom.Counter({ name, help, labelNames: ['type'], registers });
    // A count over the whole table: read when scraped (every 15–60 s, as Prometheus is usually set), at most once per depthRefreshMs.
    const statusCounts = new CachedRead(depthRefreshMs, () => store.stats());
    const oldest = new CachedRead(depthRefreshMs, () => store.oldestWaiting());
    const circuits = new CachedRead(depthRefreshMs, () => store.openCircuits());
    let metrics: JobQueueMetrics | null = null;

    new prom.Gauge({
      name: 'job_queue_jobs',
      help: 'Jobs in the database by type and status.',
      labelNames: ['type', 'status'],
      registers,
      async collect(this: Settable) {
        const stats = await statusCounts.get();
        if (!stats) return;
        this.reset();
        for (const [type, counts] of Object.entries(stats.byType)) {
          for (const status of JOB_STATUSES) this.set({ type, status }, counts[status]);
        }
      },
    });
    new prom.Gauge({
      name: 'job_queue_oldest_waiting_seconds',
      help: 'Age of the oldest due, waiting job of each type.',
      labelNames: ['type'],
      registers,
      async collect(this: Settable) {
        const ages = await oldest.get();
        if (!ages) return;
        this.reset();
        for (const [type, seconds] of ages) this.set({ type }, seconds);
      },
    });
    new prom.Gauge({
      name: 'job_queue_in_flight',
      help: 'Attempts running in this process, by type.',
      labelNames: ['type'],
      registers,
      collect(this: Settable) {
        this.reset();
        for (const [type, running] of metrics?.inFlight() ?? []) this.set({ type }, running);
      },
    });
    new prom.Gauge({
      name: 'job_queue_saturated',
      help: '1 while enqueues are refused (maxQueueDepth reached), else 0.',
      registers,
      async collect(this: Settable) {
        this.set((await backpressure.snapshot().catch(() => null))?.saturated ? 1 : 0);
      },
    });
    new prom.Gauge({
      name: 'job_queue_circuit_open',
      help: '1 for each type whose circuit is open or half-open.',
      labelNames: ['type'],
      registers,
      async collect(this: Settable) {
        const open = await circuits.get();
        if (!open) return;
        this.reset();
        for (const circuit of open) this.set({ type: circuit.type }, 1);
      },
    });

    metrics = new JobQueueMetrics(
      registry,
      counter('job_queue_jobs_enqueued_total', 'Jobs enqueued (deduplicated enqueues not counted).'),
      {
        completed: counter('job_queue_jobs_completed_total', 'Jobs completed.'),
        failed: counter('job_queue_jobs_failed_total', 'Failed attempts that will be retried.'),
        dead: counter('job_queue_jobs_dead_lettered_total', 'Jobs dead-lettered.'),
      },
      new prom.Histogram({
        name: 'job_queue_job_duration_seconds',
        help: "Handlers' run time, by outcome.",
        labelNames: ['type', 'outcome'],
        buckets: SECONDS_BUCKETS,
        registers,
      }),
      new prom.Histogram({
        name: 'job_queue_job_wait_seconds',
        help: 'From the time a job came due to the start of its attempt.',
        labelNames: ['type'],
        buckets: SECONDS_BUCKETS,
        registers,
      }),
    );
    return metrics;
  }

  enqueued(type: string, count: number): void {
    this.enqueuedTotal.inc({ type }, count);
  }

  count(type: string, outcome: TalliedOutcome): void {
    this.outcomes[outcome].inc({ type });
  }

  attemptTimed(type: string, outcome: TalliedOutcome, durationMs: number, waitMs: number | null): void {
    this.duration.observe({ type, outcome }, durationMs / 1000);
    if (waitMs !== null) this.wait.observe({ type }, waitMs / 1000);
  }

  watchInFlight(read: () => ReadonlyMap<string, number>): void {
    this.inFlight = read;
  }

  /** The module closes: its series leave the registry (an app may start another). */
  release(): void {
    for (const name of METRIC_NAMES) this.registry.removeSingleMetric(name);
  }
}
