import type { RegisteredHandler } from '../base/registered-handler.js';
import type { ClaimedJob, Lease } from '../persistence/job.store.js';
import { AttemptControl } from './attempt-control.js';
import type { PendingCompletion } from './completion-batcher.js';
import type { HeldLease } from './lease-keeper.js';
import type { HeldAttempt } from './outcome-recorder.js';

/** Who hears how an attempt's completion write went. */
export interface CompletionListener {
  completionSettled(attempt: WorkerAttempt, applied: boolean): void;
  completionFailed(attempt: WorkerAttempt, error: unknown): void;
}

/**
 * One claimed attempt as the worker tracks it, from its claim (waiting in the buffer) through its
 * run until its outcome is recorded: the job, the lease the keeper renews, the attempt's controls,
 * and, once it succeeded, its place in the completion batch. One object per attempt rather than
 * one per stage: at tens of thousands of short jobs a second, the worker's own allocations are a
 * large part of its cost.
 */
export class WorkerAttempt extends AttemptControl implements HeldLease, PendingCompletion, HeldAttempt {
  readonly id: string;
  readonly leaseToken: string;
  renewedAt: number;
  /** It holds a concurrency slot (started, and the handler has not finished). */
  slotHeld = false;
  /** When it started (the worker's clock), if the worker times its types (PrefetchSizer). */
  startedAt = 0;
  /** Set when the handler succeeded: the result as JSON text. */
  resultJson = 'null';
  /** The worker's drain ran out of time while this attempt was in flight. */
  drainTimedOut = false;

  constructor(
    readonly job: ClaimedJob,
    /** The handler of the job's type (a worker claims only types it handles). */
    readonly handler: RegisteredHandler,
    /** When this worker claimed it (the worker's monotonic clock): a buffered job that waits too long is handed back. */
    readonly claimedAt: number,
    /** When its claim was sent (the same clock): the lease counts from then. */
    leaseFrom: number,
    private readonly completionListener: CompletionListener,
  ) {
    super();
    this.id = job.id;
    this.leaseToken = job.leaseToken;
    this.renewedAt = leaseFrom;
  }

  /** A failed outcome write may go on retrying: the lease is held, and no drain has run out of time. */
  get mayKeepWriting(): boolean {
    return this.interruption === null && !this.drainTimedOut;
  }

  /** The lease a completion write presents: this attempt's. */
  get lease(): Lease {
    return this;
  }

  settled(applied: boolean): void {
    this.completionListener.completionSettled(this, applied);
  }

  failed(error: unknown): void {
    this.completionListener.completionFailed(this, error);
  }
}
