import type { EngineLogger } from '../base/logger.js';
import type { EventSink } from '../events/job-queue-event.js';
import type { JobStore, ReapedJob } from '../persistence/job.store.js';
import type { OutcomeTally } from '../base/outcome-tally.js';

/**
 * Rows per statement, so one pass never holds very many row locks at once; enough that a killed
 * worker's jobs at default settings (its running jobs, its buffer and a claim it sent ahead, each
 * up to the prefetch ceiling of 1,000 plus its concurrency, and outcomes not yet written) mostly
 * come back in one pass.
 */
const REAP_BATCH = 4_000;

/**
 * Takes back jobs whose worker stopped renewing its lease (crashed, killed, stalled): back to
 * waiting with the lost run counted, or dead if that was the last attempt. Its statement is safe
 * if two ran at once; the maintenance leader runs it so that normally only one does, and reports
 * the jobs only once that transaction has committed.
 */
export class LeaseReaper {
  constructor(
    private readonly events: EventSink,
    private readonly logger: EngineLogger,
    /** Throughput counts the dead letters of lost workers too. */
    private readonly tally?: OutcomeTally,
  ) {}

  /** One batch, in the caller's transaction. */
  reap(store: JobStore): Promise<ReapedJob[]> {
    return store.reapExpiredLeases(REAP_BATCH);
  }

  /** Events and logs for reaped jobs, once their reaping has committed. */
  report(reaped: readonly ReapedJob[]): { retried: number; dead: number } {
    let dead = 0;
    let unstarted = 0;
    for (const job of reaped) {
      if (job.status === 'pending') unstarted++;
      this.events.emit({ kind: 'lease-expired', jobId: job.id, type: job.type, workerId: job.workerId ?? undefined });
      if (job.status === 'dead') {
        dead++;
        this.tally?.count(job.type, 'dead');
        this.logger.warn(`Job ${job.id} (${job.type}) dead-lettered: its worker ${job.workerId} was lost on its last attempt, or it lost its workers too often.`);
        this.events.emit({ kind: 'dead-lettered', jobId: job.id, type: job.type, error: 'worker lost' });
      }
    }
    const retried = reaped.length - dead;
    if (retried > 0) {
      this.logger.warn(
        `Reclaimed ${retried} job(s) whose worker stopped renewing its lease` +
          (unstarted > 0 ? `; ${unstarted} of them had not started there and keep their attempts.` : '.'),
      );
    }
    return { retried, dead };
  }
}
