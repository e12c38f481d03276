import { JobQueueError } from './job-queue.error.js';

/** enqueueAndWait: no outcome within timeoutMs. The job itself is still queued and may yet run. */
export class JobWaitTimeoutError extends JobQueueError {
  readonly code = 'JOB_WAIT_TIMEOUT';

  constructor(
    readonly jobId: string,
    readonly timeoutMs: number,
    readonly status: string,
  ) {
    super(
      `Timed out after ${timeoutMs} ms waiting for job ${jobId} (status ${status}). The job was not cancelled; ` +
        'check it later with JobQueueAdmin.getJob(id), or raise timeoutMs.',
    );
  }
}
