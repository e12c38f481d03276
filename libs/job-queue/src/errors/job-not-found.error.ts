import { JobQueueError } from './job-queue.error.js';

/** An admin operation named a job id that does not exist. */
export class JobNotFoundError extends JobQueueError {
  readonly code = 'JOB_NOT_FOUND';

  constructor(readonly jobId: string) {
    super(`No job with id "${jobId}" exists (it may have been pruned by retention).`);
  }
}
