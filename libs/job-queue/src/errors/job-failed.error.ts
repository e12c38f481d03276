import { JobQueueError } from './job-queue.error.js';

/** enqueueAndWait: the job ended without a result (dead-lettered or cancelled). */
export class JobFailedError extends JobQueueError {
  readonly code = 'JOB_FAILED';

  constructor(
    readonly jobId: string,
    readonly status: 'dead' | 'cancelled',
    readonly reason: string | null,
  ) {
    super(
      status === 'dead'
        ? `Job ${jobId} was dead-lettered: ${reason ?? 'no reason recorded'}`
        : `Job ${jobId} was cancelled before it completed.`,
    );
  }
}
