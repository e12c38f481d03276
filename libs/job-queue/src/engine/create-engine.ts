import type { EngineLogger } from '../base/logger.js';
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
import { RetryPolicy } from './retry-policy.js';
import { type DrainResult, Worker } from './worker.js';

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
}

export interface EngineStatus {
  inFlight: number;
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
}

/** A pod that was down runs the latest missed slot of the last hour once (see CronScheduler). */
const CRON_CATCH_UP_MS = 3_600_000;
/** Lease renewals run at least this far apart, however short the lease. */
const MIN_RENEWAL_INTERVAL_MS = 50;

/**
 * Builds the engine from resolved options; every derived setting is computed here, once. Throws
 * JobQueueConfigError when the pool cannot serve the transactional handlers.
 */
export function createEngine({ options, store, handlers, events, logger, enqueue, poolSize }: EngineDependencies): Engine {
  const all = handlers.all();
  // A type with flow control must start right after its claim: no prefetch in its worker.
  const flowControl = all.some((h) => h.rateLimit || h.globalConcurrency || h.circuitBreaker);
  const recorder = new OutcomeRecorder(store, new CompletionBatcher(store), new RetryPolicy(), events, logger, options.workerId, options.leaseMs);
  const worker = new Worker(
    {
      workerId: options.workerId,
      concurrency: options.concurrency,
      pollIntervalMs: options.pollIntervalMs,
      leaseMs: options.leaseMs,
      transactionalCapacity: transactionalCapacity(all, options, poolSize, logger),
      prefetch: flowControl ? 0 : options.prefetch,
    },
    store,
    handlers,
    new JobRunner(store, new EffectLedger(store, logger), enqueue),
    recorder,
    logger,
  );
  recorder.onRetryScheduled((delayMs) => worker.wakeIn(delayMs));
  const keeper = new LeaseKeeper(store, options.leaseMs, worker, logger);
  const renewals = new PeriodicTask(
    'Lease renewal',
    Math.max(MIN_RENEWAL_INTERVAL_MS, Math.floor(options.leaseMs / 3)),
    () => keeper.runOnce(),
    logger,
  );
  const scheduler = new CronScheduler(all.filter((h) => h.schedule), store, logger, CRON_CATCH_UP_MS);
  let started = false;

  return {
    longestRateWindowMs: Math.max(0, ...all.map((h) => (h.rateLimit ? rateWindowMs(h.rateLimit.perMs) : 0))),
    start() {
      started = true;
      worker.start();
      renewals.start();
      scheduler.start();
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
    status: () => ({ inFlight: worker.inFlight, silentForMs: worker.silentForMs }),
    schedules: () => (started ? scheduler.schedules : []),
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
