import type { JobStore } from '../persistence/job.store.js';
import type { LeaseReaper } from './lease-reaper.js';
import type { RetentionPruner } from './retention-pruner.js';

/**
 * One maintenance pass, run only by the process that wins this pass's transaction-scoped
 * advisory lock (River's elector, without a session lock, so it works behind poolers and a dead
 * leader is replaced on the next pass).
 */
export class MaintenanceLeader {
  constructor(
    private readonly store: JobStore,
    private readonly reaper: LeaseReaper,
    private readonly pruner: RetentionPruner,
  ) {}

  /** null when another process led this pass. */
  async runOnce(): Promise<{ retried: number; dead: number } | null> {
    return this.store.asMaintenanceLeader(async (store) => {
      const reaped = await this.reaper.runOnce(store);
      await this.pruner.runOnce(store);
      return reaped;
    });
  }
}
