import type { JobStore } from '../persistence/job.store.js';

/** Rows per DELETE, and statements per status per pass: short locks, bounded work per pass. */
const BATCH = 1_000;
const BATCHES_PER_PASS = 5;

export interface RetentionSettings {
  completedMs: number;
  deadMs: number;
  /** Rate-limit start records older than this are never read again. */
  startsMs: number;
}

/** Deletes finished jobs past their retention, and rate-limit starts past every window. */
export class RetentionPruner {
  constructor(private readonly settings: RetentionSettings) {}

  async runOnce(store: JobStore): Promise<{ completed: number; cancelled: number; dead: number }> {
    const pruned = { completed: 0, cancelled: 0, dead: 0 };
    const ages = { completed: this.settings.completedMs, cancelled: this.settings.completedMs, dead: this.settings.deadMs };
    for (const status of ['completed', 'cancelled', 'dead'] as const) {
      for (let i = 0; i < BATCHES_PER_PASS; i++) {
        const deleted = await store.pruneFinished(status, ages[status], BATCH);
        pruned[status] += deleted;
        if (deleted < BATCH) break;
      }
    }
    if (this.settings.startsMs > 0) await store.pruneStarts(this.settings.startsMs);
    return pruned;
  }
}
