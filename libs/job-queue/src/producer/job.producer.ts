import { Inject, Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { JobHandlerRegistry } from '../discovery/job-handler.registry.js';
import { InvalidJobError } from '../errors/invalid-job.error.js';
import { JOB_QUEUE_OPTIONS, JOB_STORE } from '../job-queue.constants.js';
import { JobQueueMonitor } from '../maintenance/job-queue.monitor.js';
import type { ResolvedJobQueueOptions } from '../options/job-queue-options.js';
import type { JobStore, NewJob } from '../persistence/job.store.js';
import type { EnqueueManyItem, EnqueueOptions, EnqueueResult } from './enqueue-options.js';
import { validateJob } from './job-validator.js';

/** Adds jobs. Inject it anywhere; it works in producer-only processes too. */
@Injectable()
export class JobProducer {
  constructor(
    @Inject(JOB_STORE) private readonly store: JobStore,
    @Inject(JOB_QUEUE_OPTIONS) private readonly options: ResolvedJobQueueOptions,
    private readonly registry: JobHandlerRegistry,
    private readonly monitor: JobQueueMonitor,
  ) {}

  /** Adds one job; with `options.manager`, inside the caller's transaction. */
  async enqueue<P = unknown>(type: string, payload: P, options?: EnqueueOptions): Promise<EnqueueResult> {
    const job = validateJob(type, payload, options, '', this.defaultMaxAttempts(type));
    const [result] = await this.insert([job], options?.manager);
    return result;
  }

  /**
   * Adds many jobs in one statement; one result per input, in input order. One bad item rejects
   * the whole call before anything is written. Items that pass a `manager` must all pass the same.
   */
  async enqueueMany(items: ReadonlyArray<EnqueueManyItem>): Promise<EnqueueResult[]> {
    if (!Array.isArray(items)) throw new InvalidJobError('jobs', 'must be an array of { type, payload, options? }');
    const jobs: NewJob[] = [];
    let manager: EntityManager | undefined;
    items.forEach((item, index) => {
      const prefix = `jobs[${index}].`;
      if (!item || typeof item !== 'object') throw new InvalidJobError(`jobs[${index}]`, 'must be an object { type, payload, options? }');
      jobs.push(validateJob(item.type, item.payload, item.options, prefix, this.defaultMaxAttempts(item.type)));
      const itemManager = item.options?.manager;
      if (itemManager && manager && itemManager !== manager) {
        throw new InvalidJobError(`${prefix}options.manager`, 'differs from an earlier item; one enqueueMany runs in one transaction');
      }
      manager ??= itemManager;
    });
    if (jobs.length === 0) return [];
    return this.insert(jobs, manager);
  }

  /** Backpressure first (QueueSaturatedError writes nothing), then one insert statement. */
  private async insert(jobs: NewJob[], manager: EntityManager | undefined): Promise<EnqueueResult[]> {
    await this.monitor.admit(jobs.map((job) => job.type));
    const results = await this.store.enqueue(jobs, manager);
    this.monitor.recordEnqueued(jobs.filter((_, i) => !results[i].deduplicated).map((job) => job.type));
    return results;
  }

  private defaultMaxAttempts(type: unknown): number {
    return (typeof type === 'string' && this.registry.get(type)?.maxAttempts) || this.options.retry.maxAttempts;
  }
}
