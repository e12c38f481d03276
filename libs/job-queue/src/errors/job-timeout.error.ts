import { JobQueueError } from './job-queue.error.js';

/** Recorded as an attempt's error when the handler ran past its `timeoutMs`. */
export class JobTimeoutError extends JobQueueError {
  readonly code = 'JOB_TIMEOUT';

  constructor(readonly timeoutMs: number) {
    super(`timed out after ${timeoutMs} ms (job.signal was aborted)`);
  }
}
