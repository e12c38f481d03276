import { JobQueueError } from './job-queue.error.js';

/** Boot error: the module or a handler was configured in a way that cannot work. */
export class JobQueueConfigError extends JobQueueError {
  readonly code = 'JOB_QUEUE_CONFIG';
}
