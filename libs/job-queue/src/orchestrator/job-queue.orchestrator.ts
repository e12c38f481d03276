import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { JobQueueConnection } from '../connection/job-queue.connection.js';
import { JobHandlerRegistry } from '../discovery/job-handler.registry.js';
import { CompletionBatcher } from '../engine/completion-batcher.js';
import { EffectLedger } from '../engine/effect-ledger.js';
import { JobRunner } from '../engine/job-runner.js';
import { LeaseKeeper } from '../engine/lease-keeper.js';
import { OutcomeRecorder } from '../engine/outcome-recorder.js';
import { PeriodicTask } from '../base/periodic-task.js';
import { RetryPolicy } from '../engine/retry-policy.js';
import { Worker } from '../engine/worker.js';
import { JobQueueConfigError } from '../errors/job-queue-config.error.js';
import { JobQueueEvents } from '../events/job-queue.events.js';
import { JOB_QUEUE_OPTIONS, JOB_STORE } from '../base/job-queue.constants.js';
import { LeaseReaper } from '../maintenance/lease-reaper.js';
import { MaintenanceLeader } from '../maintenance/maintenance-leader.js';
import { RetentionPruner } from '../maintenance/retention-pruner.js';
import { JobNotificationHub } from '../notifications/job-notification.hub.js';
import type { ResolvedJobQueueOptions } from '../options/job-queue-options.js';
import type { JobStore } from '../persistence/job.store.js';
import { poolSizeOf } from '../persistence/pool-of.js';
import { JobProducer } from '../producer/job.producer.js';
import { CronScheduler, type ScheduledType } from '../schedules/cron-scheduler.js';
import { rateWindowMs } from '../engine/claim-planner.js';

export interface WorkerStatus {
  runWorker: boolean;
  draining: boolean;
  inFlight: number;
  /** ms since the claim loop last went round (0 while it waits on the database); null when no worker runs. */
  silentForMs: number | null;
}

/** A pod that was down runs the latest missed slot of the last hour once (see CronScheduler). */
const CRON_CATCH_UP_MS = 3_600_000;

/**
 * Nest's side of the engine: starts the worker at bootstrap (after every provider is ready),
 * marks draining as soon as shutdown begins, and drains in beforeApplicationShutdown, while the
 * HTTP server still answers and before the DataSource closes.
 */
@Injectable()
export class JobQueueOrchestrator implements OnApplicationBootstrap, OnModuleDestroy, BeforeApplicationShutdown {
  private readonly logger = new Logger('JobQueue');
  private worker: Worker | null = null;
  private leaseTask: PeriodicTask | null = null;
  private maintenanceTask: PeriodicTask | null = null;
  private scheduler: CronScheduler | null = null;
  private shuttingDown = false;
  private drained: Promise<void> | null = null;

  constructor(
    @Inject(JOB_QUEUE_OPTIONS) private readonly options: ResolvedJobQueueOptions,
    @Inject(JOB_STORE) private readonly store: JobStore,
    private readonly connection: JobQueueConnection,
    private readonly registry: JobHandlerRegistry,
    private readonly events: JobQueueEvents,
    private readonly producer: JobProducer,
    private readonly hub: JobNotificationHub,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    if (!this.options.runWorker || this.shuttingDown) return;
    // A pool too small for transactional handlers is a boot error; it closes the module's DataSource.
    const transactionalCapacity = await this.connection.closedIfFails(() => this.transactionalCapacity());
    const { options, store, events, logger } = this;
    const recorder = new OutcomeRecorder(
      store,
      new RetryPolicy(),
      events,
      logger,
      options.workerId,
      new CompletionBatcher(store),
      undefined,
      options.leaseMs,
    );
    const runner = new JobRunner(store, new EffectLedger(store, logger), (type, payload, enqueueOptions) =>
      this.producer.enqueue(type, payload, enqueueOptions),
    );
    const worker = new Worker(
      {
        workerId: options.workerId,
        concurrency: options.concurrency,
        pollIntervalMs: options.pollIntervalMs,
        leaseMs: options.leaseMs,
        transactionalCapacity,
        prefetch: this.registry.all().some((h) => h.rateLimit || h.globalConcurrency || h.circuitBreaker) ? 0 : options.prefetch,
      },
      store,
      this.registry,
      runner,
      recorder,
      logger,
    );
    this.worker = worker;
    await this.hub.subscribe((notification) => {
      if (notification.kind === 'cancel') worker.interrupt(notification.jobId, 'cancelled');
      else if (notification.kind === 'new') worker.nudge();
      else if (notification.kind === 'due') worker.wakeIn(notification.inMs);
    });
    await store.registerTypes(this.registry.types());
    // Shut down while those awaited (NestJS 11 does not wait for bootstrap to end): the drain has
    // run or is running, so nothing is started after it.
    if (this.shuttingDown) return;
    this.scheduler = new CronScheduler(
      this.registry.all().filter((h) => h.schedule),
      store,
      logger,
      CRON_CATCH_UP_MS,
    );
    const keeper = new LeaseKeeper(store, options.leaseMs, worker, logger);
    this.leaseTask = new PeriodicTask('Lease renewal', Math.max(50, Math.floor(options.leaseMs / 3)), () => keeper.runOnce(), logger);
    const longestRateWindowMs = Math.max(0, ...this.registry.all().map((h) => (h.rateLimit ? rateWindowMs(h.rateLimit.perMs) : 0)));
    const maintenance = new MaintenanceLeader(
      store,
      new LeaseReaper(events, logger),
      new RetentionPruner({ ...options.retention, startsMs: longestRateWindowMs }),
      logger,
    );
    this.maintenanceTask = new PeriodicTask(
      'Maintenance',
      options.maintenanceIntervalMs,
      async () => {
        if (((await maintenance.runOnce())?.retried ?? 0) > 0) worker.nudge();
      },
      logger,
    );
    worker.start();
    this.leaseTask.start();
    this.maintenanceTask.start();
    this.scheduler.start();
    this.logger.log(
      `Worker ${options.workerId} started: ${this.registry.types().length} job type(s), concurrency ${options.concurrency}.`,
    );
  }

  /** Shutdown has begun: readiness goes down now, before the drain starts. */
  onModuleDestroy(): void {
    this.shuttingDown = true;
    this.worker?.stopClaiming();
  }

  beforeApplicationShutdown(): Promise<void> {
    this.shuttingDown = true;
    // A second signal must not cut the drain short or release twice.
    this.drained ??= this.drain().finally(() => this.hub.stop());
    return this.drained;
  }

  /** Aborts a job this process runs (after an admin cancel). */
  interrupt(jobId: string): void {
    this.worker?.interrupt(jobId, 'cancelled');
  }

  /** Cron schedules this process runs, with their next slot. */
  schedules(): ScheduledType[] {
    return this.scheduler?.schedules ?? [];
  }

  status(): WorkerStatus {
    return {
      runWorker: this.options.runWorker,
      draining: this.shuttingDown,
      inFlight: this.worker?.inFlight ?? 0,
      silentForMs: this.worker ? this.worker.silentForMs : null,
    };
  }

  /**
   * A transactional job holds a pooled connection for its whole run. Keep enough connections for
   * claims, lease renewals and outcome writes (and LISTEN), so those never starve behind them.
   */
  private transactionalCapacity(): number {
    const transactional = this.registry.all().filter((h) => h.transactional);
    if (transactional.length === 0) return Infinity;
    const poolSize = poolSizeOf(this.connection.dataSource);
    const reserved = 2 + (this.options.listen ? 1 : 0);
    const capacity = poolSize - reserved;
    if (capacity < 1) {
      throw new JobQueueConfigError(
        `Transactional handlers (${transactional.map((h) => h.type).join(', ')}) need a connection each, and the ` +
          `DataSource pool has ${poolSize} with ${reserved} reserved for claims, lease renewals and notifications. ` +
          `Raise the pool size (DataSource option poolSize, or extra.max) to at least ${reserved + 1}.`,
      );
    }
    if (capacity < Math.min(this.options.concurrency, transactional.reduce((sum, h) => sum + h.concurrency, 0))) {
      this.logger.log(`Transactional jobs limited to ${capacity} at once by the pool size (${poolSize}, ${reserved} reserved).`);
    }
    return capacity;
  }

  private async drain(): Promise<void> {
    const worker = this.worker;
    if (!worker) return;
    this.events.emit({ kind: 'draining', workerId: this.options.workerId });
    this.logger.log(`Draining: claiming stopped; jobs in flight get up to ${this.options.drainTimeoutMs} ms to finish.`);
    await this.maintenanceTask?.stop();
    await this.scheduler?.stop();
    const { finished, released } = await worker.drain(this.options.drainTimeoutMs);
    await this.leaseTask?.stop();
    this.logger.log(`Drained: ${finished} job(s) finished, ${released} released back to pending.`);
    this.events.emit({ kind: 'drained', workerId: this.options.workerId });
  }
}
