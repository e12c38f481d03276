import { JobQueueError } from './job-queue.error.js';

/**
 * Throw from a handler when retrying cannot help (bad data, a refused request): the job is
 * dead-lettered at once instead of burning its remaining attempts.
 */
export class PermanentJobError extends JobQueueError {
  readonly code = 'JOB_PERMANENT_FAILURE';

  constructor(message: string, options?: { cause?: unknown }) {
    super(message);
    if (options && 'cause' in options) this.cause = options.cause;
  }
}
