import { JobQueueError } from './job-queue.error.js';

/** Boot error: two providers declared a handler for the same job type. */
export class DuplicateJobHandlerError extends JobQueueError {
  readonly code = 'JOB_HANDLER_DUPLICATE';

  constructor(
    readonly type: string,
    readonly first: string,
    readonly second: string,
  ) {
    super(
      `Job type "${type}" has two handlers: ${first} and ${second}. ` +
        'A job type must have exactly one @JobHandler in an application; rename or remove one of them.',
    );
  }
}
