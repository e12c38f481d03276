import { type BeforeApplicationShutdown, Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { JOB_QUEUE_OPTIONS, JOB_STORE } from '../base/job-queue.constants.js';
import { PeriodicTask } from '../base/periodic-task.js';
import { withTimeout } from '../base/with-timeout.js';
import { JobQueueEvents } from '../events/job-queue.events.js';
import type { ResolvedJobQueueOptions } from '../options/job-queue-options.js';
import type { JobStore } from '../persistence/job.store.js';
import { Backpressure, type QueueSnapshot } from '../producer/backpressure.js';

/** The queue's numbers as readiness reads them. */
export interface QueueReadiness extends QueueSnapshot {
  /** The last hour's dead letters reach the alert threshold. */
  alerting: boolean;
}

/**
 * Readiness and dead-letter alerting over the cached queue numbers (Backpressure reads them).
 * Raises the alert (event + error log) once per crossing of the threshold, also when nothing
 * probes readiness or enqueues: its own periodic read sees to that.
 */
@Injectable()
export class JobQueueMonitor implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('JobQueue');
  private wasAlerting = false;
  private readonly task: PeriodicTask;

  constructor(
    private readonly backpressure: Backpressure,
    @Inject(JOB_STORE) private readonly store: JobStore,
    @Inject(JOB_QUEUE_OPTIONS) private readonly options: ResolvedJobQueueOptions,
    private readonly events: JobQueueEvents,
  ) {
    backpressure.onRefresh((snapshot) => this.raiseAlertOnce(snapshot));
    this.task = new PeriodicTask('Queue monitor', Math.max(options.depthRefreshMs, 5_000), () => this.snapshot(), this.logger);
  }

  onApplicationBootstrap(): void {
    this.task.start();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.task.stop();
  }

  /** How long the worker loop may stay silent before liveness fails. */
  get stallThresholdMs(): number {
    return Math.max(3 * this.options.pollIntervalMs, 30_000);
  }

  async snapshot(): Promise<QueueReadiness> {
    const snapshot = await this.backpressure.snapshot();
    return { ...snapshot, alerting: this.isAlerting(snapshot) };
  }

  private isAlerting(snapshot: QueueSnapshot): boolean {
    return snapshot.deadLastHour >= this.options.deadLetterAlertThreshold;
  }

  private async raiseAlertOnce(snapshot: QueueSnapshot): Promise<void> {
    if (!this.isAlerting(snapshot)) {
      this.wasAlerting = false;
      return;
    }
    if (this.wasAlerting) return;
    this.wasAlerting = true;
    const newest = await withTimeout(this.store.listDead(null, 3), this.backpressure.snapshotTimeoutMs).catch(() => []);
    const reasons = newest.map((job) => `#${job.id} ${job.type}: ${job.lastError}`).join('; ');
    this.logger.error(
      `${snapshot.deadLastHour} job(s) dead-lettered in the last hour (alert threshold ${this.options.deadLetterAlertThreshold}). ` +
        `Newest: ${reasons || 'none listed'}. Inspect with JobQueueAdmin.listDead(), replay with retryDead(id).`,
    );
    this.events.emit({ kind: 'dead-letter-alert', count: snapshot.deadLastHour });
  }
}
