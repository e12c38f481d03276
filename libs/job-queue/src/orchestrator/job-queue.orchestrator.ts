import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  Optional,
  type OnModuleDestroy,
} from '@nestjs/common';
import { JobQueueConnection } from '../connection/job-queue.connection.js';
import { JobHandlerRegistry } from '../discovery/job-handler.registry.js';
import { createEngine, type Engine } from '../engine/create-engine.js';
import { PeriodicTask } from '../base/periodic-task.js';
import { JobQueueEvents } from '../events/job-queue.events.js';
import { JobQueueConfigError } from '../errors/job-queue-config.error.js';
import { JOB_INSTRUMENTS, JOB_QUEUE_OPTIONS, JOB_STORE, JOB_TRACING } from '../base/job-queue.constants.js';
import type { JobTracing } from '../base/job-tracing.js';
import type { JobInstruments } from '../base/job-instruments.js';
import type { OutcomeTally } from '../base/outcome-tally.js';
import { LeaseReaper } from '../maintenance/lease-reaper.js';
import { MaintenanceLeader } from '../maintenance/maintenance-leader.js';
import { PauseWatcher } from '../maintenance/pause-watcher.js';
import { RetentionPruner } from '../maintenance/retention-pruner.js';
import { ThroughputTally } from '../maintenance/throughput-tally.js';
import { WorkerHeartbeat } from '../maintenance/worker-heartbeat.js';
import { JobNotificationHub } from '../notifications/job-notification.hub.js';
import type { ResolvedJobQueueOptions } from '../options/job-queue-options.js';
import type { JobStore } from '../persistence/job.store.js';
import { poolSizeOf } from '../persistence/pool-of.js';
import { JobProducer } from '../producer/job.producer.js';
import type { ScheduledType } from '../schedules/cron-scheduler.js';
import { type DrainCounts, ManualDrain } from './manual-drain.js';

export interface WorkerStatus {
  runWorker: boolean;
  draining: boolean;
  inFlight: number;
  /** ms since the claim loop last went round (0 while it waits on the database); null when no worker runs. */
  silentForMs: number | null;
}

/**
 * Nest's side of the engine: starts the worker at bootstrap (after every provider is ready),
 * marks draining as soon as shutdown begins, and drains in beforeApplicationShutdown, while the
 * HTTP server still answers and before the DataSource closes.
 */
@Injectable()
export class JobQueueOrchestrator implements OnApplicationBootstrap, OnModuleDestroy, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly logger = new Logger('JobQueue');
  private engine: Engine | null = null;
  private maintenanceTask: PeriodicTask | null = null;
  private heartbeat: WorkerHeartbeat | null = null;
  private pauses: PauseWatcher | null = null;
  /** The heartbeat's and the pause check's tasks: they run while the worker runs, and through its drain. */
  private watchTasks: PeriodicTask[] = [];
  private shuttingDown = false;
  private drained: Promise<void> | null = null;
  private manual: ManualDrain | null = null;
  private manualRun: Promise<unknown> = Promise.resolve();

  constructor(
    @Inject(JOB_QUEUE_OPTIONS) private readonly options: ResolvedJobQueueOptions,
    @Inject(JOB_STORE) private readonly store: JobStore,
    private readonly connection: JobQueueConnection,
    private readonly registry: JobHandlerRegistry,
    private readonly events: JobQueueEvents,
    private readonly producer: JobProducer,
    private readonly hub: JobNotificationHub,
    @Optional() @Inject(JOB_INSTRUMENTS) private readonly instruments: JobInstruments | null = null,
    @Optional() @Inject(JOB_TRACING) private readonly tracing: JobTracing | null = null,
  ) {
    instruments?.watchInFlight?.(() => this.inFlightByType());
  }

  /** Last of all: the metrics' series leave the app's registry. */
  onApplicationShutdown(): void {
    this.instruments?.release?.();
  }

  async onApplicationBootstrap(): Promise<void> {
    // A manual (testing) process claims nothing on its own; its drains need the types registered.
    if (this.options.manualWorker && !this.shuttingDown) await this.store.registerTypes(this.registry.types());
    if (!this.options.runWorker || this.shuttingDown) return;
    const { options, store, events, logger, registry } = this;
    // A pool too small for transactional handlers is a boot error; it closes the module's DataSource.
    const throughput = new ThroughputTally();
    const instruments = this.instruments;
    // Outcomes feed the throughput rollup, and the metrics' counters when they are on.
    const tally: OutcomeTally = instruments
      ? { count: (type, outcome) => (throughput.count(type, outcome), instruments.count(type, outcome)) }
      : throughput;
    const engine = await this.connection.closedIfFails(() =>
      createEngine({
        options,
        store,
        handlers: registry,
        events,
        logger,
        enqueue: (type, payload, enqueueOptions) => this.producer.enqueue(type, payload, enqueueOptions),
        poolSize: () => poolSizeOf(this.connection.dataSource),
        tally,
        instruments,
        tracing: this.tracing,
      }),
    );
    this.engine = engine;
    const pauses = new PauseWatcher(store, (types) => engine.setPaused(types), events, logger);
    this.pauses = pauses;
    await this.hub.subscribe((notification) => {
      if (notification.kind === 'cancel') engine.interrupt(notification.jobId);
      else if (notification.kind === 'new') engine.nudge();
      else if (notification.kind === 'due') engine.wakeIn(notification.inMs);
      else if (notification.kind === 'paused') void pauses.refresh().catch(() => undefined);
      else if (notification.kind === 'schedules') engine.schedulesChanged();
    });
    await store.registerTypes(registry.types());
    // Paused types are known before the first claim; the database away now is retried by the task.
    await pauses.poll();
    // Shut down while those awaited (NestJS 11 does not wait for bootstrap to end): the drain has
    // run or is running, so nothing is started after it.
    if (this.shuttingDown) return;
    const maintenance = new MaintenanceLeader(
      store,
      new LeaseReaper(events, logger, tally),
      new RetentionPruner({ ...options.retention, startsMs: engine.longestRateWindowMs }),
      logger,
    );
    this.maintenanceTask = new PeriodicTask(
      'Maintenance',
      options.maintenanceIntervalMs,
      async () => {
        if (((await maintenance.runOnce())?.retried ?? 0) > 0) engine.nudge();
      },
      logger,
    );
    const self = { id: options.workerId, types: registry.types(), concurrency: options.concurrency, status: () => this.status() };
    const heartbeat = new WorkerHeartbeat(store, throughput, self, options.heartbeatIntervalMs, logger);
    this.heartbeat = heartbeat;
    this.watchTasks = [
      new PeriodicTask('Heartbeat', options.heartbeatIntervalMs, () => heartbeat.runOnce(), logger),
      // With LISTEN a pause arrives by notification at once; the read only backs it up (a lost notification).
      new PeriodicTask('Pause check', options.listen ? Math.max(options.pollIntervalMs, options.heartbeatIntervalMs) : options.pollIntervalMs, () =>
        pauses.poll(),
      logger),
    ];
    engine.start();
    this.maintenanceTask.start();
    for (const task of this.watchTasks) task.start();
    // On the list at once, not one interval after boot.
    void heartbeat.runOnce().catch((error) => this.logger.warn(`Heartbeat failed: ${(error as Error)?.message ?? error}`));
    this.logger.log(`Worker ${options.workerId} started: ${registry.types().length} job type(s), concurrency ${options.concurrency}.`);
  }

  /** Shutdown has begun: readiness goes down now, before the drain starts. */
  onModuleDestroy(): void {
    this.shuttingDown = true;
    this.engine?.stopClaiming();
  }

  beforeApplicationShutdown(): Promise<void> {
    this.shuttingDown = true;
    // A second signal must not cut the drain short or release twice.
    this.drained ??= this.drain().finally(() => this.hub.stop());
    return this.drained;
  }

  /**
   * `runWorker: 'manual'` only: runs the due jobs of `types` in this process until none is left.
   * Drains asked for at once run one after the other.
   */
  drainManually(types: readonly string[]): Promise<DrainCounts> {
    if (!this.options.manualWorker) {
      return Promise.reject(new JobQueueConfigError("JobQueueTester.drain() needs JobQueueModule.forRoot({ runWorker: 'manual' }); this process runs its worker on its own."));
    }
    const { options, store, events, logger, registry } = this;
    this.manual ??= new ManualDrain(
      {
        options,
        store,
        events,
        logger,
        enqueue: (type, payload, enqueueOptions) => this.producer.enqueue(type, payload, enqueueOptions),
        poolSize: () => poolSizeOf(this.connection.dataSource),
        instruments: this.instruments,
        tracing: this.tracing,
      },
      registry,
      store,
      logger,
    );
    const manual = this.manual;
    const run = this.manualRun.then(() => manual.run(types));
    this.manualRun = run.catch(() => undefined);
    return run;
  }

  /**
   * Attempts this process runs now, for every type it works (0 when idle), so metrics show which
   * types have a live worker; empty in a process without one.
   */
  inFlightByType(): ReadonlyMap<string, number> {
    if (!this.engine) return new Map();
    const running = this.engine.runningByType();
    return new Map(this.registry.types().map((type) => [type, running.get(type) ?? 0]));
  }

  /** Aborts a job this process runs (after an admin cancel). */
  interrupt(jobId: string): void {
    this.engine?.interrupt(jobId);
  }

  /**
   * A pause or resume was just written: a worker process re-reads the list now (emitting
   * `paused` / `resumed`) and says so; a process without a worker returns false.
   */
  async pausesChanged(): Promise<boolean> {
    if (!this.pauses) return false;
    await this.pauses.refresh();
    return true;
  }

  /** A runtime schedule was written here: this process's scheduler re-reads them now (others hear it by LISTEN, or at their next pass). */
  schedulesChanged(): void {
    this.engine?.schedulesChanged();
  }

  /** Cron schedules this process runs, with their next slot. */
  schedules(): ScheduledType[] {
    return this.engine?.schedules() ?? [];
  }

  status(): WorkerStatus {
    const engine = this.engine?.status();
    return { runWorker: this.options.runWorker, draining: this.shuttingDown, inFlight: engine?.inFlight ?? 0, silentForMs: engine?.silentForMs ?? null };
  }

  private async drain(): Promise<void> {
    const engine = this.engine;
    if (!engine) return;
    this.events.emit({ kind: 'draining', workerId: this.options.workerId });
    this.logger.log(`Draining: claiming stopped; jobs in flight get up to ${this.options.drainTimeoutMs} ms to finish.`);
    await this.maintenanceTask?.stop();
    // The list shows this worker draining at once.
    void this.heartbeat?.runOnce().catch(() => undefined);
    const { finished, released } = await engine.drain();
    await Promise.all(this.watchTasks.map((task) => task.stop()));
    await this.heartbeat?.stop();
    this.logger.log(`Drained: ${finished} job(s) finished, ${released} released back to pending.`);
    this.events.emit({ kind: 'drained', workerId: this.options.workerId });
  }
}
