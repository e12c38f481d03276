import { JobFailedError } from '../errors/job-failed.error.js';
import { JobWaitTimeoutError } from '../errors/job-wait-timeout.error.js';
import { monotonicNow } from '../base/monotonic-clock.js';
import type { JobStore } from '../persistence/job.store.js';
import type { JobNotificationHub } from '../notifications/job-notification.hub.js';

/** Poll intervals while waiting: a safety net for missed notifications and `listen: false`. */
const POLL_MIN_MS = 100;
const POLL_MAX_MS = 1_000;

/**
 * Waits for one job's outcome: woken by the finishing statement's notification, re-reading the
 * row each time (the row, not the notification, is the truth), with a slow poll as a fallback.
 */
export class JobCompletionWaiter {
  /**
   * `markRead`: with `retention.completedMs` 0 a completion keeps an awaited job's row only for
   * its waiter, which says once it has read the result; retention then deletes it.
   */
  constructor(
    private readonly store: JobStore,
    private readonly hub: JobNotificationHub,
    private readonly markRead = false,
  ) {}

  /** Call before the job is enqueued, so its notification cannot be missed. */
  async prepare(): Promise<{ wait(jobId: string, timeoutMs: number): Promise<unknown>; cancel(): void }> {
    let wake: (() => void) | null = null;
    let watchedId: string | null = null;
    const unsubscribe = await this.hub.subscribe((notification) => {
      if ((notification.kind === 'finished' || notification.kind === 'cancel') && notification.jobId === watchedId) wake?.();
    });
    const { store, markRead } = this;
    return {
      cancel: unsubscribe,
      async wait(jobId, timeoutMs) {
        watchedId = jobId;
        // Monotonic: a wall-clock step must neither end nor stretch the wait.
        const deadline = monotonicNow() + timeoutMs;
        let pollMs = POLL_MIN_MS;
        let status = 'unknown';
        try {
          for (;;) {
            // A failed read (the database briefly away) is not the job's outcome: the job is
            // queued and will run, and a caller that retried on this error would enqueue it twice.
            let readFailure: unknown;
            try {
              const job = await store.getJob(jobId);
              if (!job) throw new JobFailedError(jobId, 'cancelled', 'the job no longer exists');
              if (job.status === 'completed') {
                // Best effort: a row whose read is not recorded is deleted an hour after it completed.
                if (markRead) await store.markResultRead(jobId).catch(() => undefined);
                return job.result;
              }
              if (job.status === 'dead' || job.status === 'cancelled') throw new JobFailedError(jobId, job.status, job.lastError);
              status = job.status;
            } catch (error) {
              if (error instanceof JobFailedError) throw error;
              readFailure = error;
            }
            const remaining = deadline - monotonicNow();
            if (remaining <= 0) throw new JobWaitTimeoutError(jobId, timeoutMs, status, readFailure);
            await new Promise<void>((resolve) => {
              const timer = setTimeout(resolve, Math.min(pollMs, remaining));
              wake = () => {
                clearTimeout(timer);
                resolve();
              };
            });
            wake = null;
            pollMs = Math.min(pollMs * 2, POLL_MAX_MS);
          }
        } finally {
          unsubscribe();
        }
      },
    };
  }
}
