import { JobQueueError } from './job-queue.error.js';

/** Backpressure: the queue holds `depth` waiting jobs and the configured limit is `limit`. */
export class QueueSaturatedError extends JobQueueError {
  readonly code = 'JOB_QUEUE_SATURATED';

  constructor(
    readonly depth: number,
    readonly limit: number,
  ) {
    super(
      `Job queue is saturated: ${depth} jobs are waiting and maxQueueDepth is ${limit}. ` +
        'Retry later (answer HTTP 503 with Retry-After), or add workers.',
    );
  }
}
