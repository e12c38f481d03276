import { JobQueueError } from './job-queue.error.js';

/**
 * enqueueAndWait: no outcome within timeoutMs. The job itself is still queued and may yet run.
 * `cause`: when the last read of the job failed (the database away), that error.
 */
export class JobWaitTimeoutError extends JobQueueError {
  readonly code = 'JOB_WAIT_TIMEOUT';

  constructor(
    readonly jobId: string,
    readonly timeoutMs: number,
    readonly status: string,
    readFailure?: unknown,
  ) {
    super(
      `Timed out after ${timeoutMs} ms waiting for job ${jobId} (status ${status}` +
        (readFailure === undefined ? '' : `; its last read failed: ${(readFailure as Error)?.message ?? String(readFailure)}`) +
        '). The job was not cancelled; check it later with JobQueueAdmin.getJob(id), or raise timeoutMs.',
      readFailure === undefined ? undefined : { cause: readFailure },
    );
  }
}
