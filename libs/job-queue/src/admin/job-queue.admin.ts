import { Inject, Injectable } from '@nestjs/common';
import { InvalidJobError } from '../errors/invalid-job.error.js';
import { JobNotFoundError } from '../errors/job-not-found.error.js';
import { JobStateError } from '../errors/job-state.error.js';
import { JOB_STORE } from '../base/job-queue.constants.js';
import type { CircuitRecord, JobStats, JobStore } from '../persistence/job.store.js';
import type { ScheduledType } from '../schedules/cron-scheduler.js';
import type { JobRecord } from '../persistence/job-record.js';
import { JobQueueOrchestrator } from '../orchestrator/job-queue.orchestrator.js';

export interface ListDeadOptions {
  type?: string;
  /** @default 100, at most 1000 */
  limit?: number;
}

/** Operator API: inspect jobs, count them, and act on dead letters. */
@Injectable()
export class JobQueueAdmin {
  constructor(
    @Inject(JOB_STORE) private readonly store: JobStore,
    private readonly orchestrator: JobQueueOrchestrator,
  ) {}

  /** One entry per open (or half-open) circuit, across the cluster. */
  circuits(): Promise<CircuitRecord[]> {
    return this.store.openCircuits();
  }

  /** Cron schedules run by this process, with their next slot. */
  schedules(): ScheduledType[] {
    return this.orchestrator.schedules();
  }

  /** The job, or null for an unknown id. */
  getJob(id: string): Promise<JobRecord | null> {
    return this.store.getJob(String(id));
  }

  stats(): Promise<JobStats> {
    return this.store.stats();
  }

  /** Dead letters, newest first. */
  listDead(options: ListDeadOptions = {}): Promise<JobRecord[]> {
    const limit = options.limit ?? 100;
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
      throw new InvalidJobError('limit', `must be an integer from 1 to 1000 (got ${String(limit)})`, 'Nothing was read.');
    }
    if (options.type !== undefined && (typeof options.type !== 'string' || options.type.length === 0)) {
      throw new InvalidJobError('type', 'must be a non-empty string when given', 'Nothing was read.');
    }
    return this.store.listDead(options.type ?? null, limit);
  }

  /** Puts a dead job back to pending with its attempts reset to 0; its error history is kept. */
  async retryDead(id: string): Promise<JobRecord> {
    const record = await this.store.retryDead(String(id));
    if (record) return record;
    const current = await this.store.getJob(String(id));
    if (!current) throw new JobNotFoundError(String(id));
    throw new JobStateError(current.id, current.status, 'only dead jobs can be retried');
  }

  /**
   * A waiting job becomes `cancelled` and never runs; a running one has its signal aborted and
   * ends `cancelled`. Cancelling a cancelled job is a no-op; a finished one cannot be cancelled.
   */
  async cancel(id: string): Promise<JobRecord> {
    const outcome = await this.store.cancel(String(id));
    if (!outcome) throw new JobNotFoundError(String(id));
    const { record, previousStatus } = outcome;
    if (previousStatus === 'completed' || previousStatus === 'dead') {
      throw new JobStateError(record.id, previousStatus, 'a finished job cannot be cancelled');
    }
    if (previousStatus === 'processing') this.orchestrator.interrupt(record.id);
    return record;
  }
}
