import type { EntityManager } from 'typeorm';
import type { EnqueueOptions, EnqueueResult } from './enqueue-options.js';
import type { EnqueuedPayload } from './job-types.js';
import type { JobStatus } from './job-status.js';

/** What `job.progress()` takes: a percentage, or a JSON object of the handler's choosing. */
export type JobProgress = number | Record<string, unknown>;

/** A job this one depends on (`dependsOn`), as `job.dependencies()` reads it. */
export interface JobDependency<R = unknown> {
  id: string;
  type: string;
  /** `completed`; or `dead` or `cancelled` when this job runs anyway (`onDependencyFailure: 'run'`). */
  status: JobStatus;
  /** Its handler's result; null when it returned nothing or did not complete. */
  result: R | null;
}

/** What a handler learns about the job it runs, and what it can do through it. */
export interface JobContext {
  readonly id: string;
  readonly type: string;
  /** 1 on the first run. */
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly idempotencyKey: string | null;
  /** Aborted on timeout, on lease loss, on cancel, and when a shutdown drain times out. */
  readonly signal: AbortSignal;
  /**
   * Transactional handlers only: the transaction that also marks this job completed. Its writes
   * commit once, and only if this worker still holds the job's lease.
   */
  readonly manager?: EntityManager;
  /**
   * Runs `fn` unless an earlier attempt of this job recorded `key` as done; records it with
   * `fn`'s JSON result before returning. Later attempts get the stored result instead.
   */
  once<T>(key: string, fn: () => T | Promise<T>): Promise<T>;
  /**
   * Stores the job's latest progress (a number from 0 to 100, or a JSON object), shown by
   * `getJob().progress` and the dashboard. Writes are coalesced to a few a second; await the
   * promise to know the value is stored (before the job ends, say). A failed write is logged and
   * never fails the job; a value of the wrong kind throws InvalidJobError.
   */
  progress(value: JobProgress): Promise<void>;
  /**
   * Appends a line to the job's log (`getJob().logs`: the last 100 lines, each cut at 2 KB),
   * formatted from its arguments as console.log would. Lines are written in batches, a few a second;
   * it never throws, and a failed write is logged, never failing the job.
   */
  log(...args: unknown[]): void;
  /**
   * The jobs this one depends on (`dependsOn`), in id order, with their results: a batch's final
   * job reads every result here. Empty for a job without dependencies. A job retention or a purge
   * has deleted since is no longer listed.
   */
  dependencies<R = unknown>(): Promise<Array<JobDependency<R>>>;
  /** Enqueues a follow-up job; in a transactional handler, inside the same transaction. */
  enqueue<P = never, T extends string = string>(type: T, payload: EnqueuedPayload<P, T>, options?: EnqueueOptions): Promise<EnqueueResult>;
}
