import type { DataSource, DataSourceOptions } from 'typeorm';

/** Retry defaults applied to every job type unless its handler or the job overrides them. */
export interface RetryOptions {
  /** Attempts before a job is dead-lettered. @default 5 */
  maxAttempts?: number;
  /** Delay before the first retry; doubles with each attempt, jittered. @default 1000 */
  baseDelayMs?: number;
  /** Cap on the retry delay. @default 3600000 (one hour) */
  maxDelayMs?: number;
}

export interface JobQueueOptions {
  /**
   * TypeORM `DataSourceOptions` for PostgreSQL, which the module opens and closes itself, or an
   * initialised `DataSource` the application owns (it must list `JOB_QUEUE_ENTITIES`).
   */
  dataSource: DataSourceOptions | DataSource;
  /** PostgreSQL schema holding the module's tables. @default 'job_queue' */
  schema?: string;
  /** Create or upgrade the tables at boot, serialised across instances. @default true */
  autoMigrate?: boolean;
  /**
   * `false` makes a producer-only process: it enqueues and never claims. `'manual'` (tests, from
   * `auto-job-queue/testing`): nothing is claimed until `JobQueueTester.drain()` runs the due jobs.
   * @default true
   */
  runWorker?: boolean | 'manual';
  /** Identity written to `worker_id` on claim. @default `${hostname}-${pid}-${random}` */
  workerId?: string;
  /** Jobs in flight at once in this process, all types together. @default 10 */
  concurrency?: number;
  /**
   * Claimed jobs a worker keeps ready beyond its running ones, so a fast stream needs few claim
   * round trips. They hold leases; a drain hands them back untouched. Off (0) in a worker that
   * handles a type with a rate limit, global or group concurrency or circuit breaker, whose starts must
   * follow the claim at once. The buffer adapts to about 100 ms of work at the recent rate (none
   * while no job has finished lately), and in a worker with several types each type's share of it
   * to what its own slots start in about 100 ms at its jobs' recent run time, so slow jobs are not
   * hoarded; this is its ceiling. A job still waiting in it a renewal interval (`leaseMs / 3`, at
   * least 1 s) after its claim is handed back at the next renewal pass, for any worker to take.
   * While a backlog of jobs that run faster than a claim's round trip is worked, one more claim of
   * that many plus `concurrency` may be on its way. @default 1000
   */
  prefetch?: number;
  /** Longest idle wait between claims; notifications wake workers sooner. @default 1000 */
  pollIntervalMs?: number;
  /** Lease length; renewed while the handler runs. @default 30000 */
  leaseMs?: number;
  /** On shutdown, how long in-flight jobs may take before they are released. @default 25000 */
  drainTimeoutMs?: number;
  /** Waiting jobs (pending or failed) at which enqueue rejects. @default undefined (unbounded) */
  maxQueueDepth?: number;
  /** Per-type backpressure: waiting jobs of that type at which its enqueue rejects. */
  maxQueueDepthByType?: Record<string, number>;
  /** How stale the cached queue depth may be before enqueue or readiness refreshes it. @default 1000 */
  depthRefreshMs?: number;
  /** Retry defaults for every type. */
  retry?: RetryOptions;
  /** Dead letters within the last hour that raise an alert. @default 1 */
  deadLetterAlertThreshold?: number;
  /** Use LISTEN/NOTIFY for wake-ups; `false` for poolers in transaction mode. @default true */
  listen?: boolean;
  /**
   * Claims wait for their WAL flush (and synchronous standbys) like every other write. `false`
   * takes that flush off each job's pickup: a claim without flow control then commits with
   * `synchronous_commit` off for its own transaction. The price is paid only when PostgreSQL
   * crashes or fails over: a claim of its last moments can be undone, so its job waits again with
   * that attempt not counted (a handler that crashes PostgreSQL may then never be dead-lettered),
   * and may start elsewhere while the first run goes on until a renewal finds the lease gone and
   * aborts its signal (docs/operations/leases-and-crashes.md#synchronous-claims). @default true
   */
  synchronousClaims?: boolean;
  /** How often the maintenance leader reclaims expired leases and prunes old jobs. @default 1000 */
  maintenanceIntervalMs?: number;
  /**
   * Prometheus series on the app's prom-client registry (`prom-client` must be installed): `true`
   * for prom-client's global registry, or `{ registry }`. See docs/operations/metrics.md. @default false
   */
  metrics?: boolean | { registry?: unknown };
  /**
   * OpenTelemetry spans for enqueues and attempts, the trace context kept with each job, when the
   * app has `@opentelemetry/api` (see docs/operations/tracing.md). @default true
   */
  tracing?: boolean;
  /**
   * How often a worker process writes its heartbeat (JobQueueAdmin.workers()) and its outcome
   * tally (throughput()); a worker that misses three drops off the list. @default 5000
   */
  heartbeatIntervalMs?: number;
  /**
   * How long finished jobs are kept before the maintenance leader deletes them (in chunks, as
   * many as a pass's time budget allows). An idempotency key dedupes for as long as its job's row
   * exists.
   */
  retention?: RetentionOptions;
}

export interface RetentionOptions {
  /**
   * Completed and cancelled jobs. `0`: a completed job is deleted by the statement that completes
   * it (its result is not kept, `getJob` returns null, and its idempotency key dedupes only while
   * it waits or runs), except a job enqueued with `enqueueAndWait`, which is kept until its waiter
   * has read the result (at most an hour); cancelled jobs then go on the next retention walk.
   * @default 604800000 (7 days)
   */
  completedMs?: number;
  /** Dead letters. @default 2592000000 (30 days) */
  deadMs?: number;
}

/** Options after defaults and validation: one frozen object, resolved once at boot. */
export interface ResolvedJobQueueOptions {
  readonly dataSource: DataSourceOptions | DataSource;
  readonly schema: string;
  readonly autoMigrate: boolean;
  /** false in a manual (testing) process too: no claim loop runs on its own. */
  readonly runWorker: boolean;
  /** `runWorker: 'manual'`: JobQueueTester runs jobs when asked. */
  readonly manualWorker: boolean;
  readonly workerId: string;
  readonly concurrency: number;
  readonly prefetch: number;
  readonly pollIntervalMs: number;
  readonly leaseMs: number;
  readonly drainTimeoutMs: number;
  readonly maxQueueDepth: number | null;
  readonly maxQueueDepthByType: Readonly<Record<string, number>>;
  readonly depthRefreshMs: number;
  readonly retry: Readonly<Required<RetryOptions>>;
  readonly deadLetterAlertThreshold: number;
  readonly listen: boolean;
  readonly synchronousClaims: boolean;
  readonly maintenanceIntervalMs: number;
  readonly heartbeatIntervalMs: number;
  /** Metrics on: the registry given, or null for prom-client's global one. Off: null. */
  readonly metrics: { readonly registry: unknown } | null;
  readonly tracing: boolean;
  readonly retention: Readonly<Required<RetentionOptions>>;
}
