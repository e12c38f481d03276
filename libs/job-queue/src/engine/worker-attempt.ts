import type { RegisteredHandler } from '../discovery/registered-handler.js';
import type { ClaimedJob } from '../persistence/job.store.js';
import { AttemptControl } from './attempt-control.js';
import type { HeldLease } from './lease-keeper.js';

/**
 * One claimed attempt as the worker tracks it, from its claim (waiting in the buffer) through its
 * run until its outcome is recorded: the job, the lease the keeper renews, and the attempt's
 * controls. One object per attempt rather than one per stage: at tens of thousands of short jobs a
 * second, the worker's own allocations are a large part of its cost.
 */
export class WorkerAttempt extends AttemptControl implements HeldLease {
  readonly id: string;
  readonly leaseToken: string;
  renewedAt: number;
  /** Set when the attempt starts. */
  handler: RegisteredHandler | null = null;
  /** It holds a concurrency slot (started, and the handler has not finished). */
  slotHeld = false;

  constructor(
    readonly job: ClaimedJob,
    claimedAt: number,
  ) {
    super();
    this.id = job.id;
    this.leaseToken = job.leaseToken;
    this.renewedAt = claimedAt;
  }
}
