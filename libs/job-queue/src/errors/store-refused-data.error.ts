import { JobQueueError } from './job-queue.error.js';

/**
 * The database refused the data itself (a value jsonb cannot hold, nesting too deep, a number out
 * of range): the same write fails the same way every time, so it must not be retried. The
 * driver's error is `cause`.
 */
export class StoreRefusedDataError extends JobQueueError {
  readonly code = 'JOB_STORE_REFUSED_DATA';

  constructor(cause: unknown) {
    const message = (cause as { message?: unknown } | null)?.message;
    super(`The job database refused the data: ${typeof message === 'string' ? message : String(cause)}. Change the value; retrying will not help.`, { cause });
  }
}
