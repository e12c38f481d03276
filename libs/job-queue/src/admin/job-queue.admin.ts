import { Inject, Injectable } from '@nestjs/common';
import { InvalidJobError } from '../errors/invalid-job.error.js';
import { JobNotFoundError } from '../errors/job-not-found.error.js';
import { JobStateError } from '../errors/job-state.error.js';
import { JOB_STORE } from '../base/job-queue.constants.js';
import type { CircuitRecord, JobPage, JobStats, JobStore, ThroughputMinute, WorkerRecord } from '../persistence/job.store.js';
import type { JobStatus } from '../base/job-status.js';
import type { JobDependency } from '../base/job-context.js';
import { JobQueueEvents } from '../events/job-queue.events.js';
import { integerIn, optionalCursor, optionalStatus, optionalType, requiredType } from './operator-input.js';
import { JobHandlerRegistry } from '../discovery/job-handler.registry.js';
import type { StoredSchedule } from '../persistence/job.store.js';
import { CronSchedule } from '../schedules/cron-schedule.js';
import { checkedSchedule, type ScheduleDefinition } from './schedule-input.js';
import type { JobRecord } from '../persistence/job-record.js';
import { JobQueueOrchestrator } from '../orchestrator/job-queue.orchestrator.js';

export interface ListDeadOptions {
  type?: string;
  /** @default 100, at most 1000 */
  limit?: number;
}

export interface ListJobsOptions {
  status?: JobStatus;
  type?: string;
  /** @default 50, at most 500 */
  limit?: number;
  /** The previous page's `nextCursor`. */
  cursor?: string | null;
}

export interface RetryDeadManyOptions {
  type?: string;
  /** Called after each batch with the jobs retried so far (a progress bar's feed). */
  onProgress?: (done: number) => void;
}

export interface PurgeOptions {
  status: 'completed' | 'dead' | 'cancelled';
  type?: string;
  /** Only jobs finished (cancelled: created) more than this long ago. @default 0 */
  olderThanMs?: number;
  /** Called after each batch with the jobs deleted so far. */
  onProgress?: (done: number) => void;
}

export interface ThroughputOptions {
  /** @default 60, at most 1440 (the rollup keeps two days) */
  minutes?: number;
  type?: string;
}

const PURGEABLE = ['completed', 'dead', 'cancelled'] as const;

/** A cron schedule, declared by a handler (`source: 'decorator'`, named by its type) or added at run time. */
export interface ScheduleInfo {
  name: string;
  cron: string;
  timezone: string;
  type: string;
  /** The next slot from now, or null if the expression has none within about five years. */
  nextSlot: Date | null;
  /** @deprecated Use `nextSlot` (the same value); the 0.1 name. */
  nextRunAt: Date | null;
  /** The latest slot enqueued: a runtime schedule's record; a decorator's while its job's row exists. */
  lastSlot: Date | null;
  source: 'decorator' | 'runtime';
  /** Runtime schedules: each job's payload (`scheduledFor` added) and options. */
  payload?: Record<string, unknown>;
  options?: ScheduleDefinition['options'];
}

/** Operator API: inspect jobs, count them, and act on dead letters. */
@Injectable()
export class JobQueueAdmin {
  constructor(
    @Inject(JOB_STORE) private readonly store: JobStore,
    private readonly orchestrator: JobQueueOrchestrator,
    private readonly events: JobQueueEvents,
    private readonly registry: JobHandlerRegistry,
  ) {}

  /** Jobs newest first, one page at a time (keyset: a page never scans the table). */
  async listJobs(options: ListJobsOptions = {}): Promise<JobPage> {
    const spared = 'Nothing was read.';
    return this.store.listJobs({
      status: optionalStatus(options.status, spared),
      type: optionalType(options.type, spared),
      limit: integerIn('limit', options.limit, 50, 1, 500, spared),
      before: optionalCursor(options.cursor),
    });
  }

  /** Every dead job (of the type) back to pending with its attempts reset, as retryDead does one; resolves to how many. */
  async retryDeadMany(options: RetryDeadManyOptions = {}): Promise<number> {
    return this.store.retryDeadMany(optionalType(options.type, 'Nothing was retried.'), options.onProgress);
  }

  /** Deletes finished jobs of a status (and type, and age); resolves to how many. */
  async purge(options: PurgeOptions): Promise<number> {
    const spared = 'Nothing was deleted.';
    const status = options?.status;
    if (!(PURGEABLE as readonly unknown[]).includes(status)) {
      throw new InvalidJobError('status', `must be one of ${PURGEABLE.join(', ')} (got ${JSON.stringify(status) ?? String(status)})`, spared);
    }
    return this.store.purge(
      {
        status,
        type: optionalType(options.type, spared),
        olderThanMs: integerIn('olderThanMs', options.olderThanMs, 0, 0, Number.MAX_SAFE_INTEGER, spared),
      },
      options.onProgress,
    );
  }

  /**
   * No worker starts jobs of the type from now on (within a poll interval in other processes);
   * running ones finish, enqueues are still accepted. Stored in the database: it outlives restarts.
   */
  async pause(type: string): Promise<void> {
    const changed = await this.store.pauseType(requiredType(type, 'Nothing was paused.'));
    if (!(await this.orchestrator.pausesChanged()) && changed) this.events.emit({ kind: 'paused', type });
  }

  /** Workers start jobs of the type again. */
  async resume(type: string): Promise<void> {
    const changed = await this.store.resumeType(requiredType(type, 'Nothing was resumed.'));
    if (!(await this.orchestrator.pausesChanged()) && changed) this.events.emit({ kind: 'resumed', type });
  }

  /** The paused types, across the cluster. */
  paused(): Promise<string[]> {
    return this.store.pausedTypes();
  }

  /** Per type, how long the oldest due waiting job has waited, in seconds (types with none left out). */
  async oldestWaiting(): Promise<Record<string, number>> {
    return Object.fromEntries(await this.store.oldestWaiting());
  }

  /** One entry per live worker process (its heartbeat not expired). */
  workers(): Promise<WorkerRecord[]> {
    return this.store.workers();
  }

  /** Outcomes per minute, every minute of the window, oldest first, from the rollup (never the jobs table). */
  async throughput(options: ThroughputOptions = {}): Promise<ThroughputMinute[]> {
    const spared = 'Nothing was read.';
    return this.store.throughput(integerIn('minutes', options.minutes, 60, 1, 1440, spared), optionalType(options.type, spared));
  }

  /** One entry per open (or half-open) circuit, across the cluster. */
  circuits(): Promise<CircuitRecord[]> {
    return this.store.openCircuits();
  }

  /**
   * Every cron schedule: the handlers' (those this application declares) and those added at run
   * time (stored in the database, run by every worker process), with their next and last slots.
   */
  async schedules(): Promise<ScheduleInfo[]> {
    const now = new Date();
    const declared = this.registry.all().filter((handler) => handler.schedule);
    const [stored, lastSlots] = await Promise.all([this.store.listSchedules(), this.store.lastCronSlots(declared.map((h) => h.type))]);
    return [
      ...declared.map((handler) => ({
        name: handler.type,
        cron: handler.schedule!.expression,
        timezone: handler.schedule!.timezone,
        type: handler.type,
        nextSlot: handler.schedule!.next(now),
        nextRunAt: handler.schedule!.next(now),
        lastSlot: lastSlots.get(handler.type) ?? null,
        source: 'decorator' as const,
      })),
      ...stored.map((schedule) => runtimeInfo(schedule, now)),
    ];
  }

  /**
   * Adds a schedule, or replaces the one of that name, stored in the database: every worker
   * process enqueues one job per slot (of `type`, whether or not this process handles it), with
   * `payload` and `scheduledFor`. A changed cron or time zone starts from now.
   */
  async upsertSchedule(name: string, definition: ScheduleDefinition): Promise<ScheduleInfo> {
    const saved = await this.store.upsertSchedule(checkedSchedule(name, definition));
    this.orchestrator.schedulesChanged();
    return runtimeInfo(saved, new Date());
  }

  /** Removes a runtime schedule; false when there was none of that name (decorator schedules live in code). */
  async removeSchedule(name: string): Promise<boolean> {
    if (typeof name !== 'string' || name.length === 0) return false;
    const removed = await this.store.removeSchedule(name);
    if (removed) this.orchestrator.schedulesChanged();
    return removed;
  }

  /** The job, or null for an unknown id. */
  getJob(id: string): Promise<JobRecord | null> {
    return this.store.getJob(String(id));
  }

  /**
   * The jobs a job depends on (`dependsOn`), in id order, with their status and result: what a
   * `blocked` job waits for. Empty for a job without dependencies (or one that does not exist).
   */
  dependencies(id: string): Promise<JobDependency[]> {
    return this.store.listDependencies(String(id));
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

function runtimeInfo(schedule: StoredSchedule, now: Date): ScheduleInfo {
  let nextSlot: Date | null = null;
  try {
    nextSlot = CronSchedule.parse(schedule.cron, schedule.timezone).next(now);
  } catch {
    // Stored by a version that reads more than this one: listed, without a next slot.
  }
  return {
    name: schedule.name,
    cron: schedule.cron,
    timezone: schedule.timezone,
    type: schedule.type,
    nextSlot,
    nextRunAt: nextSlot,
    lastSlot: schedule.lastSlot,
    source: 'runtime',
    payload: schedule.payload,
    options: schedule.options,
  };
}
