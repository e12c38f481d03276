import type { EngineLogger } from '../base/logger.js';
import type { JobInstruments } from '../base/job-instruments.js';
import type { JobTracing } from '../base/job-tracing.js';
import type { OutcomeTally } from '../base/outcome-tally.js';
import { PeriodicTask } from '../base/periodic-task.js';
import type { HandlerLookup, RegisteredHandler } from '../base/registered-handler.js';
import { JobQueueConfigError } from '../errors/job-queue-config.error.js';
import type { EventSink } from '../events/job-queue-event.js';
import type { ResolvedJobQueueOptions } from '../options/job-queue-options.js';
import type { JobStore } from '../persistence/job.store.js';
import { CronScheduler, type ScheduledType } from '../schedules/cron-scheduler.js';
import { rateWindowMs } from './claim-planner.js';
import { CompletionBatcher } from './completion-batcher.js';
import { EffectLedger } from './effect-ledger.js';
import { type HandlerEnqueue, JobRunner } from './job-runner.js';
import { LeaseKeeper } from './lease-keeper.js';
import { OutcomeRecorder } from './outcome-recorder.js';
import type { PauseChange } from './paused-types.js';
import { RetryPolicy } from './retry-policy.js';
import { type DrainResult, Worker, type WorkerSettings } from './worker.js';

export interface EngineDependencies {
  readonly options: ResolvedJobQueueOptions;
  readonly store: JobStore;
  readonly handlers: HandlerLookup;
  readonly events: EventSink;
  readonly logger: EngineLogger;
  /** Enqueues for a running handler (job.enqueue), through the producer. */
  readonly enqueue: HandlerEnqueue;
  /** The DataSource pool's size; read only when a handler is transactional. */
  readonly poolSize: () => number;
  /** Counts outcomes for throughput. */
  readonly tally?: OutcomeTally;
  /** false: the cron schedules do not run (a tester's drain). @default true */
  readonly runSchedules?: boolean;
  /** Metrics, when on: handler durations and waits. */
  readonly instruments?: JobInstruments | null;
  /** Tracing, when the app has OpenTelemetry. */
  readonly tracing?: JobTracing | null;
}

export interface EngineStatus {
  inFlight: number;
  /** Claimed into the buffer, not started yet. */
  unstarted: number;
  /** A claim is on its way back (the jobs it took are in neither count yet). */
  claiming: boolean;
  /** ms since the claim loop last went round (0 while it waits on the database). */
  silentForMs: number;
}

/** One process's engine: the worker, its lease renewals and the cron schedules. */
export interface Engine {
  /** How long rate-limited types' start records must be kept (retention). */
  readonly longestRateWindowMs: number;
  start(): void;
  /** Shutdown has begun: claim and start nothing more. */
  stopClaiming(): void;
  /** Stops the schedules, drains the worker within drainTimeoutMs, then stops renewing leases. */
  drain(): Promise<DrainResult>;
  /** Aborts a job this process runs or holds (a cancel). */
  interrupt(jobId: string): void;
  /** There may be new work. */
  nudge(): void;
  /** Jobs come due in `delayMs`. */
  wakeIn(delayMs: number): void;
  status(): EngineStatus;
  /** The cron schedules this engine runs, once started. */
  schedules(): ScheduledType[];
  /** A runtime schedule was added, changed or removed somewhere. */
  schedulesChanged(): void;
  /** Attempts running now, per type. */
  runningByType(): ReadonlyMap<string, number>;
  /** The types paused now (the database's list): says which were paused or resumed since the last call. */
  setPaused(types: readonly string[]): PauseChange;
}

/** A pod that was down runs the latest missed slot of the last hour once (see CronScheduler). */
const CRON_CATCH_UP_MS = 3_600_000;
/** Lease renewals run at least this far apart, however short the lease. */
const MIN_RENEWAL_INTERVAL_MS = 50;

/** What the engine derives from the options and handlers, once. */
export interface EngineSettings {
  readonly worker: WorkerSettings;
  readonly renewalIntervalMs: number;
  /** How long rate-limited types' start records must be kept (retention). */
  readonly longestRateWindowMs: number;
}

/**
 * Builds the engine from resolved options. Throws JobQueueConfigError when the pool cannot serve
 * the transactional handlers.
 */
export function createEngine({ options, store, handlers, events, logger, enqueue, poolSize, tally, runSchedules = true, instruments = null, tracing = null }: EngineDependencies): Engine {
  const settings = engineSettings(options, handlers.all(), poolSize, logger);
  const recorder = new OutcomeRecorder(store, new CompletionBatcher(store), new RetryPolicy(), events, logger, options.workerId, options.leaseMs);
  const runner = new JobRunner(store, new EffectLedger(store, logger), enqueue, { store, logger, workerId: options.workerId });
  const worker = new Worker(settings.worker, store, handlers, runner, recorder, logger, undefined, instruments, tracing);
  recorder.onRetryScheduled((delayMs) => worker.wakeIn(delayMs));
  if (tally) recorder.tallyInto(tally);
  const keeper = new LeaseKeeper(store, options.leaseMs, worker, logger);
  const renewals = new PeriodicTask('Lease renewal', settings.renewalIntervalMs, () => keeper.runOnce(), logger);
  const scheduler = new CronScheduler(handlers.all().filter((h) => h.schedule), store, logger, CRON_CATCH_UP_MS, Date.now, {
    defaultMaxAttempts: options.retry.maxAttempts,
    // Notifications bring changes at once; without LISTEN a new schedule is seen within 5 s.
    rereadEveryMs: options.listen ? 30_000 : 5_000,
  });
  let started = false;

  return {
    longestRateWindowMs: settings.longestRateWindowMs,
    start() {
      started = true;
      worker.start();
      renewals.start();
      if (runSchedules) scheduler.start();
    },
    stopClaiming: () => worker.stopClaiming(),
    async drain() {
      await scheduler.stop();
      const drained = await worker.drain(options.drainTimeoutMs);
      await renewals.stop();
      return drained;
    },
    interrupt: (jobId) => worker.interrupt(jobId, 'cancelled'),
    nudge: () => worker.nudge(),
    wakeIn: (delayMs) => worker.wakeIn(delayMs),
    status: () => ({ inFlight: worker.inFlight, unstarted: worker.unstarted, claiming: worker.claiming, silentForMs: worker.silentForMs }),
    schedules: () => (started ? scheduler.schedules : []),
    setPaused: (types) => worker.setPaused(types),
    schedulesChanged: () => scheduler.refresh(),
    runningByType: () => worker.runningByType(),
  };
}

/** The settings derived once from the options and the handlers; reads the pool's size only for transactional handlers. */
export function engineSettings(
  options: ResolvedJobQueueOptions,
  handlers: readonly RegisteredHandler[],
  poolSize: () => number,
  logger: EngineLogger,
): EngineSettings {
  // A type with flow control must start right after its claim: no prefetch in its worker. So must a
  // grouped type: a group's buffered jobs would count against its cap while they wait here.
  const flowControl = handlers.some((h) => h.rateLimit || h.globalConcurrency || h.circuitBreaker || h.groupConcurrency);
  return {
    worker: {
      workerId: options.workerId,
      concurrency: options.concurrency,
      pollIntervalMs: options.pollIntervalMs,
      leaseMs: options.leaseMs,
      transactionalCapacity: transactionalCapacity(handlers, options, poolSize, logger),
      prefetch: flowControl ? 0 : options.prefetch,
    },
    renewalIntervalMs: Math.max(MIN_RENEWAL_INTERVAL_MS, Math.floor(options.leaseMs / 3)),
    longestRateWindowMs: Math.max(0, ...handlers.map((h) => (h.rateLimit ? rateWindowMs(h.rateLimit.perMs) : 0))),
  };
}

/**
 * A transactional job holds a pooled connection for its whole run: keep enough for claims, lease
 * renewals and outcome writes (and LISTEN), so those never starve behind them.
 */
function transactionalCapacity(
  handlers: readonly RegisteredHandler[],
  options: ResolvedJobQueueOptions,
  poolSize: () => number,
  logger: EngineLogger,
): number {
  const transactional = handlers.filter((h) => h.transactional);
  if (transactional.length === 0) return Infinity;
  const size = poolSize();
  const reserved = 2 + (options.listen ? 1 : 0);
  const capacity = size - reserved;
  if (capacity < 1) {
    throw new JobQueueConfigError(
      `Transactional handlers (${transactional.map((h) => h.type).join(', ')}) need a connection each, and the ` +
        `DataSource pool has ${size} with ${reserved} reserved for claims, lease renewals and notifications. ` +
        `Raise the pool size (DataSource option poolSize, or extra.max) to at least ${reserved + 1}.`,
    );
  }
  if (capacity < Math.min(options.concurrency, transactional.reduce((sum, h) => sum + h.concurrency, 0))) {
    logger.log(`Transactional jobs limited to ${capacity} at once by the pool size (${size}, ${reserved} reserved).`);
  }
  return capacity;
}
