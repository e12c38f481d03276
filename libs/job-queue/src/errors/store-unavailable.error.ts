import { JobQueueError } from './job-queue.error.js';

/**
 * The database could not be reached, or could not serve the statement for now (connection lost,
 * server starting or shutting down, out of connections, a conflict that rolled back). The same
 * call may succeed later; the driver's error is `cause`.
 */
export class StoreUnavailableError extends JobQueueError {
  readonly code = 'JOB_STORE_UNAVAILABLE';

  constructor(cause: unknown) {
    super(
      `The job database could not serve this call now: ${describeCause(cause)}. Retry later; the queue itself recovers once the database answers again.`,
      { cause },
    );
  }
}

function describeCause(cause: unknown): string {
  const message = (cause as { message?: unknown } | null)?.message;
  return typeof message === 'string' && message.length > 0 ? message : String(cause);
}
