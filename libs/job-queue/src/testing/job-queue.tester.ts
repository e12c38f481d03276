import { Inject, Injectable } from '@nestjs/common';
import { JobQueueAdmin } from '../admin/job-queue.admin.js';
import { JOB_QUEUE_OPTIONS } from '../base/job-queue.constants.js';
import { JobHandlerRegistry } from '../discovery/job-handler.registry.js';
import { InvalidJobError } from '../errors/invalid-job.error.js';
import { JobFailedError } from '../errors/job-failed.error.js';
import { JobQueueConfigError } from '../errors/job-queue-config.error.js';
import type { ResolvedJobQueueOptions } from '../options/job-queue-options.js';
import type { DrainCounts } from '../orchestrator/manual-drain.js';
import { JobQueueOrchestrator } from '../orchestrator/job-queue.orchestrator.js';
import type { JobRecord } from '../persistence/job-record.js';
import { JobProducer } from '../producer/job.producer.js';

export interface DrainOptions {
  /** Only these types (each must have a handler here). @default every type with a handler */
  types?: string[];
}

/** Waiting jobs read per status by `enqueued()`: a test's queue, not a production backlog. */
const ENQUEUED_LIMIT = 500;

/**
 * Runs jobs when a test asks (`runWorker: 'manual'`), through the real pipeline: claims, leases,
 * the payload schema, the handler, the outcome. Injectable anywhere in an app whose module was
 * configured with `runWorker: 'manual'`.
 */
@Injectable()
export class JobQueueTester {
  constructor(
    @Inject(JOB_QUEUE_OPTIONS) private readonly options: ResolvedJobQueueOptions,
    private readonly orchestrator: JobQueueOrchestrator,
    private readonly registry: JobHandlerRegistry,
    private readonly producer: JobProducer,
    private readonly admin: JobQueueAdmin,
  ) {}

  /**
   * Runs every due job (of the types) in this process, and the due jobs those enqueue, until none
   * is left; resolves to what ran. A failed attempt is counted once: its retry waits for its delay.
   */
  async drain(options: DrainOptions = {}): Promise<DrainCounts> {
    this.requireManual('drain');
    return this.orchestrator.drainManually(this.handledTypes(options.types));
  }

  /** The waiting jobs (pending, or failed and waiting for a retry), oldest first. */
  async enqueued(options: { type?: string } = {}): Promise<JobRecord[]> {
    const pages = await Promise.all(
      (['pending', 'failed'] as const).map((status) => this.admin.listJobs({ status, type: options.type, limit: ENQUEUED_LIMIT })),
    );
    return pages.flatMap((page) => page.jobs).sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
  }

  /**
   * Enqueues one job and runs it (with any other due job of its type) through the whole pipeline:
   * schema, context, handler. Resolves to its result; rejects with JobFailedError naming the
   * failure (one attempt only: a failure dead-letters it at once).
   */
  async perform<R = unknown>(type: string, payload: unknown): Promise<R> {
    this.requireManual('perform');
    const [handled] = this.handledTypes([type]);
    const { id } = await this.producer.enqueue(handled, payload, { maxAttempts: 1 });
    await this.orchestrator.drainManually([handled]);
    const job = await this.admin.getJob(id);
    if (job?.status === 'completed') return job.result as R;
    if (job?.status === 'dead' || job?.status === 'cancelled') throw new JobFailedError(id, job.status, job.lastError);
    throw new JobFailedError(
      id,
      'dead',
      `the job did not run (status ${job?.status ?? 'deleted'}): is its type held back by a pause, a rate limit or an open circuit?`,
    );
  }

  private handledTypes(types: unknown): string[] {
    const handled = this.registry.types();
    if (types === undefined) return handled;
    if (!Array.isArray(types) || types.some((type) => typeof type !== 'string')) {
      throw new InvalidJobError('types', 'must be an array of job types', 'Nothing was run.');
    }
    const unknown = types.filter((type) => !handled.includes(type));
    if (unknown.length > 0) {
      throw new InvalidJobError('types', `has no @JobHandler in this application: ${unknown.join(', ')}`, 'Nothing was run.');
    }
    return types;
  }

  private requireManual(method: string): void {
    if (!this.options.manualWorker) {
      throw new JobQueueConfigError(
        `JobQueueTester.${method}() needs JobQueueModule.forRoot({ runWorker: 'manual' }): this process's worker runs jobs on its own.`,
      );
    }
  }
}
