import type { EngineLogger } from '../base/logger.js';
import type { JobStore } from '../persistence/job.store.js';
import type { LeaseReaper } from './lease-reaper.js';
import type { RetentionPruner } from './retention-pruner.js';

/**
 * One maintenance pass, run only by the process that wins the transaction-scoped advisory lock
 * (River's elector, without a session lock, so it works behind poolers and a dead leader is
 * replaced on the next pass). Reaping and pruning each take the lock in a transaction of their
 * own: a pruning pass that fails must not undo the reaping before it, nor keep reaped rows locked
 * while it runs.
 */
export class MaintenanceLeader {
  constructor(
    private readonly store: JobStore,
    private readonly reaper: LeaseReaper,
    private readonly pruner: RetentionPruner,
    private readonly logger: EngineLogger,
  ) {}

  /** null when another process led this pass. */
  async runOnce(): Promise<{ retried: number; dead: number } | null> {
    const reaped = await this.store.asMaintenanceLeader((store) => this.reaper.reap(store));
    if (reaped === null) return null;
    const counts = this.reaper.report(reaped);
    try {
      await this.store.asMaintenanceLeader((store) => this.pruner.runOnce(store));
    } catch (error) {
      // Logged here, not thrown: the caller still needs the reaping's counts (to wake its worker).
      this.logger.warn(`Pruning old jobs failed: ${(error as Error)?.message ?? error}; retrying next pass.`);
    }
    return counts;
  }
}
