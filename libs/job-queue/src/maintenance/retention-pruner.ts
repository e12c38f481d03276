import type { JobStore } from '../persistence/job.store.js';

/** Jobs looked at per statement by the walk over completed and cancelled jobs, and statements per pass. */
const CHUNK = 1_000;
const CHUNKS_PER_PASS = 5;
/** Dead letters per DELETE, and statements per pass. */
const DEAD_BATCH = 1_000;
const DEAD_BATCHES_PER_PASS = 5;
/**
 * Between two walks, a rest of a tenth of the retention, at most a minute: a table with nothing
 * created before the retention window then costs one chunk a minute.
 */
const MAX_REST_MS = 60_000;

export interface RetentionSettings {
  completedMs: number;
  deadMs: number;
  /** Rate-limit start records older than this are never read again. */
  startsMs: number;
}

export interface Pruned {
  completed: number;
  cancelled: number;
  dead: number;
}

/**
 * Deletes finished jobs past their retention, and rate-limit starts past every window.
 *
 * Completed and cancelled jobs have no index of their own (a completion would pay for its entry),
 * so they are found by walking the table in id order, a chunk per statement and a few chunks per
 * pass. Ids grow with creation time, and a job is created before it finishes, so the walk starts
 * over from the beginning once a chunk ends in jobs created within the retention window, and
 * rests a while first. Where the walk is and when it may go on are kept in the database and
 * written in the pass's transaction: every process that leads a pass carries on the same walk,
 * and a pass that fails leaves the walk where it was.
 */
export class RetentionPruner {
  constructor(private readonly settings: RetentionSettings) {}

  async runOnce(store: JobStore): Promise<Pruned> {
    const pruned: Pruned = { completed: 0, cancelled: 0, dead: 0 };
    await this.walk(store, pruned);
    for (let i = 0; i < DEAD_BATCHES_PER_PASS; i++) {
      const deleted = await store.pruneDead(this.settings.deadMs, DEAD_BATCH);
      pruned.dead += deleted;
      if (deleted < DEAD_BATCH) break;
    }
    if (this.settings.startsMs > 0) await store.pruneStarts(this.settings.startsMs);
    return pruned;
  }

  private async walk(store: JobStore, pruned: Pruned): Promise<void> {
    const walk = await store.retentionWalk();
    if (!walk.due) return;
    let walkedTo = walk.walkedTo;
    for (let i = 0; i < CHUNKS_PER_PASS; i++) {
      const chunk = await store.pruneFinishedChunk(walkedTo, CHUNK, this.settings.completedMs);
      pruned.completed += chunk.completed;
      pruned.cancelled += chunk.cancelled;
      if (chunk.scanned < CHUNK || chunk.reachedRecent || chunk.lastId === null) {
        await store.saveRetentionWalk('0', Math.min(MAX_REST_MS, Math.ceil(this.settings.completedMs / 10)));
        return;
      }
      walkedTo = chunk.lastId;
    }
    await store.saveRetentionWalk(walkedTo, 0);
  }
}
