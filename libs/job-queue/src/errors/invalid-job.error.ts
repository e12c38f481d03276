import { JobQueueError } from './job-queue.error.js';

/** An enqueue was refused before anything was written; `field` names the offending input. */
export class InvalidJobError extends JobQueueError {
  readonly code = 'JOB_INVALID';

  constructor(
    readonly field: string,
    problem: string,
    /** What the refusal spared; admin reads say so instead of "nothing was enqueued". */
    outcome = 'Nothing was enqueued.',
  ) {
    super(`Invalid job: ${field} ${problem}. ${outcome}`);
  }
}
