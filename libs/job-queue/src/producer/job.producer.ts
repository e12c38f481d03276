import { Inject, Injectable, Optional } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { JobHandlerRegistry } from '../discovery/job-handler.registry.js';
import { InvalidJobError } from '../errors/invalid-job.error.js';
import { QueueSaturatedError } from '../errors/queue-saturated.error.js';
import { JOB_INSTRUMENTS, JOB_QUEUE_OPTIONS, JOB_STORE, JOB_TRACING } from '../base/job-queue.constants.js';
import type { JobTracing } from '../base/job-tracing.js';
import type { JobInstruments } from '../base/job-instruments.js';
import type { ResolvedJobQueueOptions } from '../options/job-queue-options.js';
import type { JobStore, NewJob } from '../persistence/job.store.js';
import { JobNotificationHub } from '../notifications/job-notification.hub.js';
import type { EnqueueAndWaitOptions, EnqueueManyItem, EnqueueOptions, EnqueueResult } from '../base/enqueue-options.js';
import { Backpressure } from './backpressure.js';
import { JobCompletionWaiter } from './job-completion.waiter.js';
import { validateJob } from './job-validator.js';
import type { EnqueuedPayload } from '../base/job-types.js';

/** Adds jobs. Inject it anywhere; it works in producer-only processes too. */
@Injectable()
export class JobProducer {
  constructor(
    @Inject(JOB_STORE) private readonly store: JobStore,
    @Inject(JOB_QUEUE_OPTIONS) private readonly options: ResolvedJobQueueOptions,
    private readonly registry: JobHandlerRegistry,
    private readonly backpressure: Backpressure,
    hub: JobNotificationHub,
    @Optional() @Inject(JOB_INSTRUMENTS) private readonly instruments: JobInstruments | null = null,
    @Optional() @Inject(JOB_TRACING) private readonly tracing: JobTracing | null = null,
  ) {
    this.waiter = new JobCompletionWaiter(store, hub, options.retention.completedMs === 0);
  }

  private readonly waiter: JobCompletionWaiter;

  /** Adds one job; with `options.manager`, inside the caller's transaction. */
  async enqueue<P = never, T extends string = string>(type: T, payload: EnqueuedPayload<P, T>, options?: EnqueueOptions): Promise<EnqueueResult> {
    const job = validateJob(type, payload, options, null, this.defaultMaxAttempts(type));
    const [result] = await this.insert([job], options?.manager);
    return result;
  }

  /**
   * Enqueues and resolves with the handler's result, or rejects with JobFailedError (its message
   * holds the dead-letter reason) or JobWaitTimeoutError. Works in producer-only processes too.
   */
  async enqueueAndWait<R = unknown, P = never, T extends string = string>(
    type: T,
    payload: EnqueuedPayload<P, T>,
    options: EnqueueAndWaitOptions,
  ): Promise<R> {
    const timeoutMs = options?.timeoutMs;
    if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs <= 0) {
      throw new InvalidJobError('options.timeoutMs', `must be a positive number of milliseconds (got ${String(timeoutMs)})`);
    }
    if ((options as EnqueueOptions).manager) {
      throw new InvalidJobError(
        'options.manager',
        'cannot be used with enqueueAndWait: the job is invisible to workers until your transaction commits',
      );
    }
    const { timeoutMs: _timeout, ...enqueueOptions } = options;
    const job = validateJob(type, payload, enqueueOptions, null, this.defaultMaxAttempts(type));
    job.notifyOnFinish = true;
    const waiting = await this.waiter.prepare();
    let id: string;
    try {
      [{ id }] = await this.insert([job], undefined);
    } catch (error) {
      waiting.cancel();
      throw error;
    }
    return (await waiting.wait(id, timeoutMs)) as R;
  }

  /**
   * Adds many jobs in one statement; one result per input, in input order. One bad item rejects
   * the whole call before anything is written. Items that pass a `manager` must all pass the same.
   */
  async enqueueMany(items: ReadonlyArray<EnqueueManyItem>): Promise<EnqueueResult[]> {
    if (!Array.isArray(items)) throw new InvalidJobError('jobs', 'must be an array of { type, payload, options? }');
    const jobs: NewJob[] = new Array(items.length);
    let manager: EntityManager | undefined;
    for (let index = 0; index < items.length; index++) {
      const item = items[index];
      if (!item || typeof item !== 'object') throw new InvalidJobError(`jobs[${index}]`, 'must be an object { type, payload, options? }');
      jobs[index] = validateJob(item.type, item.payload, item.options, index, this.defaultMaxAttempts(item.type));
      const itemManager = item.options?.manager;
      if (itemManager && manager && itemManager !== manager) {
        throw new InvalidJobError(`jobs[${index}].options.manager`, 'differs from an earlier item; one enqueueMany runs in one transaction');
      }
      manager ??= itemManager;
    }
    if (jobs.length === 0) return [];
    return this.insert(jobs, manager);
  }

  /** Backpressure first (QueueSaturatedError writes nothing), then one insert statement. */
  private async insert(jobs: NewJob[], manager: EntityManager | undefined): Promise<EnqueueResult[]> {
    let admitted = jobs;
    let settle: (notInserted: readonly string[]) => void;
    try {
      settle = await this.backpressure.admit(jobs.map((job) => job.type));
    } catch (error) {
      if (!(error instanceof QueueSaturatedError)) throw error;
      // A saturated queue still answers an idempotent enqueue repeated (a client retrying its
      // request): a job whose key exists adds no row, so it takes no place. The rest must fit.
      // The lookup failing (the database away) leaves the answer as it was: saturated.
      admitted = await this.withoutExisting(jobs, manager).catch(() => jobs);
      if (admitted.length === jobs.length) throw error;
      settle = admitted.length === 0 ? () => undefined : await this.backpressure.admit(admitted.map((job) => job.type));
    }
    let results: EnqueueResult[];
    try {
      results = this.tracing
        ? await this.tracing.traceEnqueue(
            jobs.map((job) => job.type),
            (contexts) => {
              contexts.forEach((traceContext, i) => (jobs[i].traceContext = traceContext));
              return this.store.enqueue(jobs, manager);
            },
            (inserted) => inserted.map((result) => result.id),
          )
        : await this.store.enqueue(jobs, manager);
    } catch (error) {
      settle(admitted.map((job) => job.type));
      throw error;
    }
    // Places were reserved for the admitted jobs only: release those that were not inserted after all.
    const reserved = admitted === jobs ? null : new Set(admitted);
    settle(jobs.filter((job, i) => (results[i].deduplicated || results[i].debounced) && (reserved === null || reserved.has(job))).map((job) => job.type));
    if (this.instruments) for (let i = 0; i < jobs.length; i++) if (!results[i].deduplicated && !results[i].debounced) this.instruments.enqueued(jobs[i].type, 1);
    return results;
  }

  /** The jobs whose idempotency key names no existing job (jobs without a key included). */
  private async withoutExisting(jobs: NewJob[], manager: EntityManager | undefined): Promise<NewJob[]> {
    const keyed = jobs.filter((job) => job.idempotencyKey !== null);
    if (keyed.length === 0) return jobs;
    const ids = await this.store.findIdempotent(keyed.map((job) => ({ type: job.type, key: job.idempotencyKey! })), manager);
    const existing = new Set(keyed.filter((_, i) => ids[i] !== null));
    return jobs.filter((job) => !existing.has(job));
  }

  private defaultMaxAttempts(type: unknown): number {
    return (typeof type === 'string' && this.registry.get(type)?.maxAttempts) || this.options.retry.maxAttempts;
  }
}
