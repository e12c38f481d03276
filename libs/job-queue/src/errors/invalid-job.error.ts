import { JobQueueError } from './job-queue.error.js';

/** An enqueue was refused before anything was written; `field` names the offending input. */
export class InvalidJobError extends JobQueueError {
  readonly code = 'JOB_INVALID';

  constructor(
    readonly field: string,
    problem: string,
  ) {
    super(`Invalid job: ${field} ${problem}. Nothing was enqueued.`);
  }
}
