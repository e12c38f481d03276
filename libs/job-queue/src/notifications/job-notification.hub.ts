import { Inject, Injectable, Logger } from '@nestjs/common';
import { JobQueueConnection } from '../connection/job-queue.connection.js';
import { JOB_QUEUE_OPTIONS } from '../base/job-queue.constants.js';
import type { ResolvedJobQueueOptions } from '../options/job-queue-options.js';
import { JobNotificationListener } from '../persistence/job-notification.listener.js';
import type { JobNotification } from '../base/job-notification.js';
import { poolOf, poolSizeOf } from '../persistence/pool-of.js';

type Subscriber = (notification: JobNotification) => void;

/**
 * The process's one LISTEN connection, shared by the worker (new jobs, cancels) and by
 * enqueueAndWait callers (finished jobs). Started on first use; with `listen: false` it never
 * starts and everyone relies on polling. JobQueueOrchestrator stops it after the drain.
 */
@Injectable()
export class JobNotificationHub {
  private readonly logger = new Logger('JobQueue');
  private readonly subscribers = new Set<Subscriber>();
  private listener: JobNotificationListener | null = null;
  private starting: Promise<void> | null = null;
  private stopped = false;

  constructor(
    @Inject(JOB_QUEUE_OPTIONS) private readonly options: ResolvedJobQueueOptions,
    private readonly connection: JobQueueConnection,
  ) {}

  get enabled(): boolean {
    return this.options.listen && !this.stopped;
  }

  /** Subscribes and makes sure the LISTEN connection is up; returns the unsubscribe function. */
  async subscribe(subscriber: Subscriber): Promise<() => void> {
    this.subscribers.add(subscriber);
    await this.start();
    return () => this.subscribers.delete(subscriber);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.starting?.catch(() => undefined);
    await this.listener?.stop();
    this.listener = null;
  }

  private start(): Promise<void> {
    if (!this.enabled) return Promise.resolve();
    const poolSize = poolSizeOf(this.connection.dataSource);
    if (poolSize < 2) {
      // LISTEN holds its connection for good: with a pool of one, nothing else could ever run.
      this.logger.warn('The DataSource pool has 1 connection, so LISTEN is off and workers poll; use a pool of 2 or more.');
      this.stopped = true;
      return Promise.resolve();
    }
    this.starting ??= (async () => {
      this.listener = new JobNotificationListener(
        poolOf(this.connection.dataSource),
        this.options.schema,
        (notification) => this.dispatch(notification),
        this.logger,
      );
      await this.listener.start();
    })();
    return this.starting;
  }

  private dispatch(notification: JobNotification): void {
    for (const subscriber of this.subscribers) {
      try {
        subscriber(notification);
      } catch (error) {
        this.logger.error(`Notification subscriber failed: ${(error as Error)?.message ?? error}`);
      }
    }
  }
}
