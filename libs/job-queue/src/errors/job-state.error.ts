import { JobQueueError } from './job-queue.error.js';

/** An admin operation does not apply to the job in its current status. */
export class JobStateError extends JobQueueError {
  readonly code = 'JOB_STATE';

  constructor(
    readonly jobId: string,
    readonly status: string,
    action: string,
  ) {
    super(`Job ${jobId} is ${status}; ${action}.`);
  }
}
