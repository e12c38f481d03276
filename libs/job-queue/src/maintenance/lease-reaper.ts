import type { EngineLogger } from '../engine/engine-logger.js';
import type { EventSink } from '../engine/events.js';
import type { JobStore } from '../persistence/job.store.js';

/** Rows per statement, so one pass never holds many row locks at once. */
const REAP_BATCH = 500;

/**
 * Takes back jobs whose worker stopped renewing its lease (crashed, killed, stalled). Runs only
 * in the process holding the maintenance lock for this pass; the statement itself is also safe
 * if two ran at once.
 */
export class LeaseReaper {
  constructor(
    private readonly store: JobStore,
    private readonly events: EventSink,
    private readonly logger: EngineLogger,
    /** Rate-limit start records older than this are no longer read and are pruned. */
    private readonly startsRetentionMs = 0,
  ) {}

  async runOnce(): Promise<{ retried: number; dead: number }> {
    const reaped = await this.store.asMaintenanceLeader(async (store) => {
      const jobs = await store.reapExpiredLeases(REAP_BATCH);
      if (this.startsRetentionMs > 0) await store.pruneStarts(this.startsRetentionMs);
      return jobs;
    });
    let dead = 0;
    for (const job of reaped ?? []) {
      this.events.emit({ kind: 'lease-expired', jobId: job.id, type: job.type, workerId: job.workerId ?? undefined });
      if (job.status === 'dead') {
        dead++;
        this.logger.warn(`Job ${job.id} (${job.type}) dead-lettered: its worker ${job.workerId} was lost on the last attempt.`);
        this.events.emit({ kind: 'dead-lettered', jobId: job.id, type: job.type, error: 'worker lost' });
      }
    }
    const retried = (reaped?.length ?? 0) - dead;
    if (retried > 0) this.logger.warn(`Reclaimed ${retried} job(s) whose worker stopped renewing its lease.`);
    return { retried, dead };
  }
}
